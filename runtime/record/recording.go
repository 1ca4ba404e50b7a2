package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
)

// Recording is what a recording holds for one camera, besides the frames'
// pixels.
type Recording struct {
	Path   string
	Camera string
	// Frames is the number of recorded frames of the camera; FirstSeq and
	// LastSeq their first and last sequence numbers (mod 2^32 as stored),
	// First and Last their capture times.
	Frames            int
	FirstSeq, LastSeq uint32
	First, Last       time.Time
	// Events are the camera's alert events recorded live, in file order,
	// as they were published (the versioned event schema, alerts/schema
	// event.v1.json): the recording reader knows no alert engine type.
	Events []RecordedEvent
	// Models is the last didoedge.models metadata record (nil when
	// absent); ModelsChanged says that the file holds several that differ
	// (a SIGHUP reload swapped the calibration while it was recorded).
	Models        map[string]string
	ModelsChanged bool
	// Truncated: the file ends inside a chunk (its writer was killed).
	Truncated bool
}

// RecordedEvent is one alert event of a recording: its channel's topic,
// its log time and its JSON payload (a didoedge.event/1 document).
type RecordedEvent struct {
	Topic   string
	LogTime uint64
	JSON    json.RawMessage
}

// Decode unmarshals the event's payload into v (an alerts.Event, a map).
func (e RecordedEvent) Decode(v any) error {
	if err := json.Unmarshal(e.JSON, v); err != nil {
		return fmt.Errorf("channel %s: event at log time %d: %w", e.Topic, e.LogTime, err)
	}
	return nil
}

// ReadRecording walks a local recording and collects one camera's
// frames' range and events; camera "" takes the only camera with frames.
func ReadRecording(path, camera string) (*Recording, error) {
	return ReadRecordingFrom(path, mcapsource.FileOpener(path), camera)
}

// ReadRecordingFrom is ReadRecording of the recording open opens (one
// streamed pass: an object in S3 is not copied); path names it (a path
// or an s3:// URL).
func ReadRecordingFrom(path string, open mcapsource.Opener, camera string) (*Recording, error) {
	r, err := mcapsource.OpenReaderFrom(path, open)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rec := &Recording{Path: path, Camera: camera}
	var events []mcapsource.Message
	var m mcapsource.Message
	for {
		if err := r.Next(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		switch m.Stream {
		case mcaprec.ImageStream:
			if rec.Camera == "" {
				rec.Camera = m.Camera
			} else if m.Camera != rec.Camera {
				if camera == "" {
					return nil, fmt.Errorf("recording %s: frames of cameras %s and %s: name one", path, rec.Camera, m.Camera)
				}
				continue
			}
			t := time.Unix(0, int64(m.LogTime))
			if rec.Frames == 0 {
				rec.FirstSeq, rec.First = m.Sequence, t
			}
			rec.Frames++
			rec.LastSeq, rec.Last = m.Sequence, t
		case mcaprec.EventsStream:
			m.Data = append([]byte(nil), m.Data...)
			events = append(events, m)
		}
	}
	rec.Truncated = r.Truncated()
	for _, md := range r.Metadata() {
		if md.Name == mcaprec.ModelsMetadata {
			if rec.Models != nil && !maps.Equal(rec.Models, md.Metadata) {
				rec.ModelsChanged = true
			}
			rec.Models = md.Metadata
		}
	}
	if rec.Frames == 0 {
		what := "no frames"
		if camera != "" {
			what = "no frames of camera " + camera
		}
		return nil, fmt.Errorf("recording %s: %s", path, what)
	}
	for _, em := range events {
		if em.Camera != rec.Camera {
			continue
		}
		// An event must at least be a JSON object: its schema's fields are
		// read by whoever decodes it (RecordedEvent.Decode).
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(em.Data, &probe); err != nil {
			return nil, fmt.Errorf("recording %s: channel %s: event at log time %d: %w", path, em.Topic, em.LogTime, err)
		}
		rec.Events = append(rec.Events, RecordedEvent{Topic: em.Topic, LogTime: em.LogTime, JSON: append(json.RawMessage(nil), em.Data...)})
	}
	return rec, nil
}

// ModelChanges lists how the models and calibration of a replay (from
// runtime/RunIdentity or ModelIdentity) differ from the
// recording's: one line per file whose sha256 differs or is missing on
// one side; none when the replay uses the recorded files. The
// calibration compared is the recorded camera's own
// (CalibrationOf): in a recording of several cameras each names
// its file.
func (r *Recording) ModelChanges(now map[string]string) []string {
	if r.Models == nil {
		return []string{"the recording does not name its models (no didoedge.models metadata)"}
	}
	var out []string
	diff := func(name, wasPath, was, isPath, is string) {
		switch {
		case was == is:
		case was == "":
			out = append(out, fmt.Sprintf("%s: %s (the recording used none: built-in defaults)", name, isPath))
		case is == "":
			out = append(out, fmt.Sprintf("%s: built-in defaults (the recording used %s)", name, wasPath))
		default:
			out = append(out, fmt.Sprintf("%s: %s sha256 %.12s, recorded %s sha256 %.12s", name, isPath, is, wasPath, was))
		}
	}
	for _, name := range []string{"depth", "auxue"} {
		diff(name, r.Models[name+"_path"], r.Models[name+"_sha256"], now[name+"_path"], now[name+"_sha256"])
	}
	wasPath, was := CalibrationOf(r.Models, r.Camera)
	isPath, is := CalibrationOf(now, r.Camera)
	diff("calibration", wasPath, was, isPath, is)
	return out
}
