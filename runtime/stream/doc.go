// Package stream is the streaming core of didoedge: it takes the newest
// camera frame, resizes and normalizes it into the depth model's
// pre-allocated input tensor, runs the depth model and the AuxUE (package
// runtime/infer), reads out depth, the Laplace scale b and the DIDO
// epistemic map K/S, and hands them to the camera's alert engine, which
// decides episodes and delivers them to its sinks: event snapshots, MQTT
// through a durable outbox, and the pipeline's own hook (alertsink.go).
//
// Frames are never queued: the camera's single-slot mailbox keeps only the
// newest frame, and every frame the pipeline did not take is counted as
// dropped. Each stage is timed into Prometheus histograms (Metrics). The
// steady-state frame path allocates nothing; the debug page (runtime/apps/debugpage)
// gets copies of the maps only while a browser is watching, at a bounded rate.
//
// The deployment's configuration is package runtime/runconfig; the
// applications built on the core (demo, bench, replay, the debug page) live
// beside it under runtime/ and nothing here imports them.
package stream
