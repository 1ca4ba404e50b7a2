// Package runconfig is the configuration of a didoedge deployment: one
// YAML file with the camera (or cameras), inference (providers and the
// models' IO specs), alerts, HTTP, pipeline and recorder sections. Load
// validates all of it up front, rejecting unknown keys and naming the key
// and the file in every error; the streaming core (runtime/stream), the
// calibration (calib/calibrate) and the applications read it, and it runs
// nothing itself.
//
// Each section has its own file here (camera.go, models.go, http.go,
// pipeline.go, alerts.go, live.go, domain.go; config.go holds the file's
// type and the order of the checks), with its defaults and validation.
// Sections that a package below owns are that package's types: inference
// is onnxrt.Config, record is record.Config, and the alerts section's
// transports (mqtt, outbox, embedded, homeassistant) are mqttpub's,
// outbox's and broker's, which also name the files they read
// (mqttpub.ServiceConfig.Files) and check their directories
// (outbox.Config.CheckDir). The HTTP and live sections stay here: their
// owners (runtime/service, runtime/apps/live) sit above the config.
package runconfig
