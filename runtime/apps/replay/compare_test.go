package replay

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/record"
)

func ev(typ alerts.EventType, zone string, level, prev alerts.Level, frame uint64, startMS, timeMS int64) alerts.Event {
	return alerts.Event{ID: "front-" + zone + "-" + string(rune('0'+startMS%10)), Type: typ, Kind: alerts.KindZone, Camera: "front", Zone: zone,
		Level: level, Previous: prev, FrameSeq: frame, StartMS: startMS, TimeMS: timeMS}
}

func TestCompare(t *testing.T) {
	W, C, O := alerts.LevelWarn, alerts.LevelCritical, alerts.LevelOK
	recorded := []alerts.Event{
		ev(alerts.EventNew, "a", W, O, 10, 1000, 1000),
		ev(alerts.EventUpdate, "a", C, W, 12, 1000, 1200),
		ev(alerts.EventEnd, "a", O, C, 20, 1000, 2000),
		ev(alerts.EventNew, "b", W, O, 11, 1001, 1100),
		ev(alerts.EventEnd, "b", O, W, 30, 1001, 3000),
	}
	stale := ev(alerts.EventEnd, "c", O, W, 5, 900, 950) // opened before the file
	stale.ID = "front-c-older"
	rec := &record.Recording{}
	recEvents := append(append([]alerts.Event(nil), recorded...), stale)
	shutdownEnd := recorded[4]
	shutdownEnd.TimeMS = 99999 // ended at wall time: compared by frame

	tests := []struct {
		name       string
		replayed   []alerts.Event
		mismatches int
		want       []string
	}{
		{"same", []alerts.Event{recorded[0], recorded[1], recorded[2], recorded[3], shutdownEnd}, 0,
			[]string{"zone a: episodes recorded 1, replayed 1; events 3, mismatches 0", "replay matches the recording: 5 events in 2 zones", "1 recorded events belong"}},
		{"level differs", func() []alerts.Event {
			r := append([]alerts.Event(nil), recorded...)
			r[1].Level = W
			return r
		}(), 1, []string{"MISMATCH frame 12", "level critical, replayed warn"}},
		{"missing and extra", []alerts.Event{recorded[0], recorded[2], recorded[3], recorded[4], ev(alerts.EventNew, "d", W, O, 40, 4000, 4000)}, 2,
			[]string{"not raised by the replay", "raised only by the replay", "zone d: episodes recorded 0, replayed 1", "2 mismatches among 6 events"}},
		{"start time differs", func() []alerts.Event {
			r := append([]alerts.Event(nil), recorded...)
			r[0].TimeMS++
			return r
		}(), 1, []string{"time 00:00:01.000, replayed 00:00:01.001"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Compare(rec, recEvents, tc.replayed)
			var out bytes.Buffer
			res.Write(&out)
			if res.Mismatches != tc.mismatches || res.Match() != (tc.mismatches == 0) || len(res.Skipped) != 1 {
				t.Fatalf("mismatches %d (skipped %d), want %d:\n%s", res.Mismatches, len(res.Skipped), tc.mismatches, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestModelChanges(t *testing.T) {
	r := &record.Recording{Models: map[string]string{"depth_path": "/m/depth.onnx", "depth_sha256": "aa", "auxue_sha256": "bb", "auxue_path": "/m/auxue.onnx"}}
	if got := r.ModelChanges(map[string]string{"depth_sha256": "aa", "auxue_sha256": "bb"}); len(got) != 0 {
		t.Fatalf("same models: %v", got)
	}
	got := r.ModelChanges(map[string]string{"depth_sha256": "aa", "auxue_sha256": "cc", "auxue_path": "/n/auxue.onnx",
		"calibration_sha256": "dd", "calibration_path": "/n/cal.yaml"})
	if len(got) != 2 || !strings.Contains(got[0], "auxue: /n/auxue.onnx sha256 cc, recorded /m/auxue.onnx sha256 bb") ||
		!strings.Contains(got[1], "calibration: /n/cal.yaml (the recording used none") {
		t.Fatalf("changes %q", got)
	}
	if got := (&record.Recording{}).ModelChanges(nil); len(got) != 1 {
		t.Fatalf("no metadata: %v", got)
	}
}

// TestCompareRotatedFile: a file of a rotated recording starts inside an
// episode and ends inside another; the replay's episode opened on the
// first frame continues the recorded one and its end on the last frame is
// the file's end: both noted, no mismatch. A level difference inside the
// continued episode still counts.
func TestCompareRotatedFile(t *testing.T) {
	W, C, O := alerts.LevelWarn, alerts.LevelCritical, alerts.LevelOK
	old := func(e alerts.Event) alerts.Event { e.ID = "front-a-old"; e.StartMS = 500; return e }
	rec := &record.Recording{FirstSeq: 100, LastSeq: 200}
	recEvents := []alerts.Event{
		old(ev(alerts.EventUpdate, "a", C, W, 150, 0, 1500)),
		old(ev(alerts.EventEnd, "a", O, C, 180, 0, 1800)),
		ev(alerts.EventNew, "b", W, O, 190, 1900, 1900),
	}
	replayed := []alerts.Event{
		ev(alerts.EventNew, "a", W, O, 100, 1000, 1000),
		ev(alerts.EventUpdate, "a", C, W, 150, 1000, 1500),
		ev(alerts.EventEnd, "a", O, C, 180, 1000, 1800),
		ev(alerts.EventNew, "b", W, O, 190, 1900, 1900),
		ev(alerts.EventEnd, "b", O, W, 200, 1900, 99999),
	}
	res := Compare(rec, recEvents, replayed)
	var out bytes.Buffer
	res.Write(&out)
	if !res.Match() || len(res.Notes) != 2 || len(res.Skipped) != 0 || len(res.Zones) != 2 || len(res.Zones[0].Pairs) != 2 {
		t.Fatalf("rotated file:\n%s", out.String())
	}
	for _, want := range []string{"continues recorded episode front-a-old", "still open at the file's last frame 200"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	replayed[1].Level = W
	if res := Compare(rec, recEvents, replayed); res.Mismatches != 1 {
		t.Fatalf("a level difference in the continued episode: %d mismatches", res.Mismatches)
	}
}

// TestModelChangesPerCamera: in a recording of several cameras each
// camera names its own calibration file, and a replay of one camera is
// compared with that camera's file; files from before per-camera
// calibrations are compared with their one file.
func TestModelChangesPerCamera(t *testing.T) {
	twoCameras := map[string]string{"depth_sha256": "aa", "auxue_sha256": "bb", "cameras": "front,left",
		"camera.front.calibration_path": "/c/front.yaml", "camera.front.calibration_sha256": "f1",
		"camera.left.calibration_path": "/c/left.yaml", "camera.left.calibration_sha256": "l1"}
	oldFormat := map[string]string{"depth_sha256": "aa", "auxue_sha256": "bb", "calibration_path": "/c/front.yaml", "calibration_sha256": "f1"}
	replayWith := func(camera, sha string) map[string]string {
		now := map[string]string{"depth_sha256": "aa", "auxue_sha256": "bb", "cameras": camera}
		if sha != "" {
			now["camera."+camera+".calibration_path"] = "/n/" + camera + ".yaml"
			now["camera."+camera+".calibration_sha256"] = sha
			now["calibration_path"], now["calibration_sha256"] = "/n/"+camera+".yaml", sha
		}
		return now
	}
	for _, tc := range []struct {
		name, camera string
		recorded     map[string]string
		now          map[string]string
		want         string // "" when the replay uses the recorded files
	}{
		{"left with its own file", "left", twoCameras, replayWith("left", "l1"), ""},
		{"left with front's file", "left", twoCameras, replayWith("left", "f1"), "calibration: /n/left.yaml sha256 f1, recorded /c/left.yaml sha256 l1"},
		{"front with its own file", "front", twoCameras, replayWith("front", "f1"), ""},
		{"left on the defaults", "left", twoCameras, replayWith("left", ""), "calibration: built-in defaults (the recording used /c/left.yaml)"},
		{"a camera recorded on the defaults", "rear", map[string]string{"depth_sha256": "aa", "auxue_sha256": "bb", "cameras": "rear"},
			replayWith("rear", "r1"), "calibration: /n/rear.yaml (the recording used none"},
		{"file from before per-camera calibrations", "front", oldFormat, replayWith("front", "f1"), ""},
		{"file from before, other calibration", "front", oldFormat, replayWith("front", "x9"), "calibration: /n/front.yaml sha256 x9, recorded /c/front.yaml sha256 f1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&record.Recording{Camera: tc.camera, Models: tc.recorded}).ModelChanges(tc.now)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("changes %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("changes %q, want one containing %q", got, tc.want)
			}
		})
	}
}

// TestRecordedEventsDecode: the events a recording holds as published JSON
// decode to the alert events that were published; a payload that is no
// event names its channel and log time.
func TestRecordedEventsDecode(t *testing.T) {
	want := []alerts.Event{ev(alerts.EventNew, "a", alerts.LevelWarn, alerts.LevelOK, 10, 1000, 1000),
		ev(alerts.EventEnd, "a", alerts.LevelOK, alerts.LevelWarn, 20, 1000, 2000)}
	rec := &record.Recording{Path: "drive.mcap"}
	for i := range want {
		b, err := json.Marshal(&want[i])
		if err != nil {
			t.Fatal(err)
		}
		rec.Events = append(rec.Events, record.RecordedEvent{Topic: "didoedge/v1/front/events", LogTime: uint64(i), JSON: b})
	}
	got, err := RecordedEvents(rec)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v (%v), want %+v", got, err, want)
	}
	rec.Events[1].JSON = []byte(`{"type": 7}`)
	if _, err := RecordedEvents(rec); err == nil || !strings.Contains(err.Error(), "didoedge/v1/front/events") || !strings.Contains(err.Error(), "log time 1") {
		t.Fatalf("a payload of the wrong type: err = %v", err)
	}
}
