package mcaprec

import "fmt"

// Streams of a camera: the suffixes of its topics.
const (
	ImageStream           = "image"
	DepthStream           = "depth"
	ScaleStream           = "laplace_scale"
	EpistemicStream       = "epistemic"
	CalibrationStream     = "camera_calibration"
	EventsStream          = "events"
	ZoneStatesStream      = "zone_states"
	RecorderMetadata      = "didoedge"
	ModelsMetadata        = "didoedge.models"
	EpisodesMetadata      = "didoedge.episodes"
	ProfileName           = ""
	LibraryName           = "didoedge"
	MapsUnitMetres        = "m"
	MapsUnitDimensionless = "1"
)

// CheckCamera validates a camera id used in topic names: 1-64 letters,
// digits or _ (the camera pattern of alerts/schema).
func CheckCamera(id string) error {
	if len(id) == 0 || len(id) > 64 {
		return fmt.Errorf("camera id %q: want 1-64 letters, digits or _", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("camera id %q: want 1-64 letters, digits or _", id)
		}
	}
	return nil
}

// CheckStream validates a JSON stream name: a lower-case word of letters,
// digits and _ starting with a letter, not one of the image streams.
func CheckStream(name string) error {
	ok := len(name) > 0 && len(name) <= 63 && name[0] >= 'a' && name[0] <= 'z'
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("stream name %q: want a lower-case word of letters, digits and _", name)
	}
	switch name {
	case ImageStream, DepthStream, ScaleStream, EpistemicStream, CalibrationStream:
		return fmt.Errorf("stream name %q is reserved for images", name)
	}
	return nil
}

// Topic is the topic of a camera's stream.
func Topic(camera, stream string) string { return "/" + camera + "/" + stream }

// SplitTopic returns the camera and stream of a recording topic.
func SplitTopic(topic string) (camera, stream string, ok bool) {
	if len(topic) < 4 || topic[0] != '/' {
		return "", "", false
	}
	for i := 1; i < len(topic); i++ {
		if topic[i] == '/' {
			return topic[1:i], topic[i+1:], i > 1 && i+1 < len(topic)
		}
	}
	return "", "", false
}
