// Package layout checks the module's import rules (README "Layout", and
// the design notes): the method (auxue/) imports nothing from the runtime,
// cameras, data sets or alerts; the general leaves (pkg/) import nothing
// of the project but each other; camera sources do not import the
// streaming core; alerts read maps, not models; inference knows no
// transport and no method package; the streaming core (runtime/stream) and
// its service layer (runtime/service) know no simulated world and no
// application, directly or through any dependency (go list -deps);
// the recorder knows no MQTT and writes no data-set layout; calibration
// imports no application and no deployment config; data sets sit below
// calibration and the offline tools; and no package imports one above it
// (runtime/apps, offline, cmd). It has no code, only its tests
// (layout_test.go), which read the imports with `go list`.
package layout
