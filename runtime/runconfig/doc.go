// Package runconfig is the configuration of a didoedge deployment: one
// YAML file with the camera (or cameras), inference (providers and the
// models' IO specs), alerts, HTTP, pipeline and recorder sections. Load
// validates all of it up front, rejecting unknown keys and naming the key
// and the file in every error; the streaming core (runtime/stream), the
// calibration (calib/calibrate) and the applications read it, and it runs
// nothing itself.
package runconfig
