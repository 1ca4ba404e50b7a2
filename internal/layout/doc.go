// Package layout checks the module's import rules (DESIGN.md "Layout"):
// the method (auxue/) imports nothing from the runtime, cameras, data sets
// or alerts; camera sources do not import the streaming core; alerts read
// maps, not models; inference knows no transport; the streaming core
// (runtime/stream) knows no simulated world and no application; the
// recorder knows no MQTT and writes no data-set layout; calibration
// imports no application; data sets sit below calibration and the offline
// tools; and no package imports one above it (runtime/apps, offline, cmd).
// It has no code, only its tests (layout_test.go), which read the imports
// with `go list`.
package layout
