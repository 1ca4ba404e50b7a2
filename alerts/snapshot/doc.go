// Package snapshot renders event snapshots and keeps them in a bounded
// directory.
//
// A snapshot is a JPEG of the very frame an event was decided on, with the
// DIDO epistemic heat map blended over it, the zone's outline in the colour
// of its level and a label (zone, level, capture time); its EXIF block
// carries the capture time (DateTimeOriginal, SubSecTimeOriginal, UTC) and
// the event id. The engine asks for one at an episode's new event and at its
// peaks (alerts.SnapshotSink); Sink renders it, stores it under the
// episode id (the latest replaces the earlier) and names it in the event;
// the MQTT sink after it publishes the same bytes retained. Store bounds the
// directory by a byte budget, deleting the oldest snapshots first.
package snapshot
