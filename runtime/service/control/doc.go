// Package control is the run-time control of a pipeline: the configuration
// in force (the file's, with the changes applied since) and its
// operations (zones, cameras, profiles, parameters), each built on a copy,
// validated, applied through the pipeline's reload path and optionally
// written back to the config file; served as the control API over HTTP
// and the MQTT set topics, and used by the Foxglove live view's parameters.
package control
