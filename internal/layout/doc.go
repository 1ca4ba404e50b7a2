// Package layout checks the module's import rules (DESIGN.md): auxue is the
// method alone and imports nothing from runtime, camera, calib or offline;
// nothing in the streaming path (runtime, camera, alerts) imports the
// offline training applications or calib's evaluation protocol. It has no
// code, only its test.
package layout
