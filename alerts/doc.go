// Package alerts turns per-pixel uncertainty maps into per-zone risk,
// fuses that risk over time, and decides alert levels and episodes that do
// not flicker.
//
// It knows maps and zones, not models, and not its transports: the
// streaming runtime hands it plain float32 maps per frame (DIDO epistemic
// K/S, Laplace scale b, depth); the Assessor computes zone metrics; the
// Engine (one per camera) fuses each zone's signals with a frame-rate
// independent moving average, applies enter/exit hysteresis, entry and
// exit inertia, a minimum episode length and a merge window (all in
// seconds, see Timing), and owns the camera's episodes: new/update/end
// events with a stable id, ended on reload and shutdown. It delivers events
// and zone states to a Sink, a small interface with optional extensions
// (stats, snapshots, the zone set); transports live in subpackages: mqttpub
// (paho publisher over a durable outbox, Home Assistant discovery), outbox,
// snapshot (event snapshots and their bounded store), broker (embedded MQTT
// broker) and schema (JSON Schemas of every payload).
//
// Configuration files are YAML with unknown keys rejected; every error names
// the file and the key path (for example "zones.yaml: zones[2].polygon: needs
// at least 3 points").
package alerts
