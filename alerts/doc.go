// Package alerts turns per-pixel uncertainty maps into per-zone risk, alert
// levels with hysteresis, and alert events.
//
// It knows maps and zones, not models: the streaming runtime hands it plain
// float32 maps per frame (DIDO epistemic K/S, Laplace scale b, depth) and it
// answers with zone metrics (Assessor), levels that do not flicker (Engine)
// and new/update/end events with a stable id per zone episode. Publishing is
// in subpackages: outbox (durable on-disk queue), mqttpub (paho publisher),
// broker (embedded MQTT broker) and schema (JSON Schemas of every payload).
//
// Configuration files are YAML with unknown keys rejected; every error names
// the file and the key path (for example "zones.yaml: zones[2].polygon: needs
// at least 3 points").
package alerts
