// Package replay runs a recorded drive's frames through the pipeline
// (`didoedge replay FILE`, Run) and compares what the recording says
// happened (record.ReadRecording: its frames' range, the alert events
// published live, the models it was made with) with the events of the
// replay (`--compare`): per zone, episode by episode, which events match
// and which do not.
//
// Events are paired by their frame: the same type on the same frame
// sequence number; a pair matches when the levels, the episode's start and
// the episode id agree (ids are camera-zone-capture ms-counter, all from
// the recording). End events are compared by frame, not by time, because
// an episode ended at shutdown ends at wall time.
package replay
