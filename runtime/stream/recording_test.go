package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"

	dto "github.com/prometheus/client_model/go"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/mcapcheck"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// flickerCalibration makes the test models' zones cross their thresholds
// often on the synthetic frames: with tau_e at the median of their K/S
// (about 0.494), the left half's OOD fraction moves between 0.36 and 0.45
// and the right half's between 0.55 and 0.64 with the frame's pattern, so
// the left zone opens and ends warn episodes and the right zone moves
// between warn and critical.
const flickerCalibration = `version: 1
tau_e: 0.4939
tau_a: 1000
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.42, exit: 0.41}, critical: {enter: 0.6, exit: 0.59}}
`

// eventLog collects the events a pipeline raises (OnEvent runs on the
// pipeline goroutine; the test reads after Run returned).
type eventLog struct {
	mu  sync.Mutex
	evs []alerts.Event
}

func (l *eventLog) add(ev *alerts.Event) {
	l.mu.Lock()
	l.evs = append(l.evs, *ev)
	l.mu.Unlock()
}

func (l *eventLog) all() []alerts.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]alerts.Event(nil), l.evs...)
}

// TestReplayDeterminism records a live run (synthetic camera, test
// models, lossless PNG frames), checks the file with Foxglove's reader,
// replays it through a new pipeline with the same models and calibration,
// and requires the same events: type, zone, levels, episode id and start,
// frame and time (ends by frame: an episode open at shutdown ends at wall
// time).
func TestReplayDeterminism(t *testing.T) {
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	if err := os.WriteFile(filepath.Join(s.dir, "flicker.yaml"), []byte(flickerCalibration), 0o644); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(testmodels.ConfigYAML, "  url: rtsp://127.0.0.1:1/unused", "flicker.yaml", testmodels.ConfigZones)
	text = strings.Replace(text, "exit_inertia: 0s", "enter_inertia: 0s, exit_inertia: 0s", 1)
	// A queue of 64: on the shared test machine the recorder must not drop
	// a frame, or the replay would miss it.
	text += "record: {mode: continuous, dir: rec, frame_format: png, queue: 64, intrinsics: [60, 60, 32, 16]}\n"
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	var live eventLog
	p, _, stop := startPipeline(t, s, 15, live.add)
	waitFor(t, 30*time.Second, "60 assessed frames", func() bool { return p.Metrics().Camera(0).Frames.Load() >= 60 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st, call := p.rec.stats()
	frames := p.Metrics().Camera(0).Frames.Load()
	t.Logf("live: %d frames, %d events; recorder: %d written, %d dropped, %d bytes, worker CPU %v, frame calls %v",
		frames, len(live.all()), st.FramesWritten, st.FramesDropped, st.BytesWritten, st.WorkerCPU, call)
	if st.FramesDropped != 0 || st.MessagesDropped != 0 || st.WriteErrors != 0 {
		t.Fatalf("recorder lost data: %+v", st)
	}
	if st.FramesWritten != frames || st.FilesClosed != 1 {
		t.Fatalf("recorder wrote %d frames in %d files, the pipeline assessed %d", st.FramesWritten, st.FilesClosed, frames)
	}
	var metrics bytes.Buffer
	if _, err := p.Metrics().WriteTo(&metrics); err != nil {
		t.Fatal(err)
	}
	// Read back with client_golang's own parser, as Prometheus would.
	mfs := parseExposition(t, metrics.String())
	for _, c := range []struct {
		name string
		want float64
	}{
		{"didoedge_record_frames_written_total", float64(frames)},
		{"didoedge_record_frames_dropped_total", 0},
		{"didoedge_record_bytes_written_total", float64(st.BytesWritten)},
		{"didoedge_record_queue_frames", 0},
	} {
		if got := value(sample(mfs, c.name, nil)); got != c.want {
			t.Errorf("/metrics %s = %v, want %v", c.name, got, c.want)
		}
	}
	if mf := mfs["didoedge_record_worker_cpu_seconds_total"]; mf == nil || mf.GetType() != dto.MetricType_COUNTER {
		t.Errorf("/metrics lacks the counter didoedge_record_worker_cpu_seconds_total")
	}
	files, _ := filepath.Glob(filepath.Join(s.dir, "rec", "rec-*.mcap"))
	if len(files) != 1 {
		t.Fatalf("recordings %v, want one", files)
	}
	path := files[0]

	liveEvents := live.all()
	var news, ends int
	for _, ev := range liveEvents {
		switch ev.Type {
		case alerts.EventNew:
			news++
		case alerts.EventEnd:
			ends++
		}
	}
	if news < 2 || ends < 2 {
		t.Fatalf("the live run raised %d new and %d end events (%d in all): too few to compare", news, ends, len(liveEvents))
	}

	// Foxglove's reader: summary, counts, schemas; one image and three maps
	// per frame, every event and the camera calibration.
	rep := mcapcheck.Check(t, path)
	for _, topic := range []string{"/front/image", "/front/depth", "/front/laplace_scale", "/front/epistemic"} {
		if rep.Counts[topic] != int(frames) {
			t.Errorf("%s: %d messages, want %d", topic, rep.Counts[topic], frames)
		}
	}
	// The maps are recorded on the models' grids in float16, the grid in
	// each channel's metadata (the frame here is the model input's size).
	if md := rep.Channels["/front/depth"].Metadata; md["resolution"] != "computed" || md["value_encoding"] != "float16" ||
		md["input_size"] != md["frame_size"] || rep.Decoded["/front/epistemic"]["encoding"] != "16UC1" {
		t.Errorf("depth channel metadata %v, epistemic %v", md, rep.Decoded["/front/epistemic"])
	}
	if rep.Counts["/front/events"] != len(liveEvents) || rep.Counts["/front/camera_calibration"] != 1 || rep.Counts["/front/zone_states"] == 0 {
		t.Errorf("counts %v, want %d events and one camera calibration", rep.Counts, len(liveEvents))
	}

	// What the file says happened is what happened live.
	rec, err := record.ReadRecording(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Events) != len(liveEvents) {
		t.Fatalf("recorded %d events, live %d", len(rec.Events), len(liveEvents))
	}
	for i := range liveEvents {
		var ev alerts.Event
		if err := rec.Events[i].Decode(&ev); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(ev)
		b, _ := json.Marshal(liveEvents[i])
		if !bytes.Equal(a, b) {
			t.Fatalf("recorded event %d %s, live %s", i, a, b)
		}
	}
	if rec.Models["depth_sha256"] == "" || rec.Models["calibration_path"] != filepath.Join(s.dir, "flicker.yaml") {
		t.Errorf("didoedge.models metadata %v", rec.Models)
	}

	// Replay through a new pipeline, same config, recording off.
	cfg, err := runconfig.Load(s.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Record.Mode = "off"
	cfg.AlertsConfig.Outbox.Dir = filepath.Join(t.TempDir(), "outbox")
	src, err := mcapsource.Open(mcapsource.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var replayed eventLog
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p2, err := New(ctx, cfg, Options{Source: src, OnEvent: replayed.add})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p2.Metrics().Camera(0).Frames.Load(); got != frames || src.Frames() != int(frames) {
		t.Fatalf("replay assessed %d frames (source delivered %d), live %d", got, src.Frames(), frames)
	}
	replayedEvents := replayed.all()
	if len(replayedEvents) != len(liveEvents) {
		t.Fatalf("replay raised %d events, live %d:\nlive %+v\nreplay %+v", len(replayedEvents), len(liveEvents), liveEvents, replayedEvents)
	}
	for i, a := range liveEvents {
		b := replayedEvents[i]
		same := a.Type == b.Type && a.Kind == b.Kind && a.Zone == b.Zone && a.Level == b.Level && a.Previous == b.Previous &&
			a.ID == b.ID && a.StartMS == b.StartMS && a.FrameSeq == b.FrameSeq && (a.Type == alerts.EventEnd || a.TimeMS == b.TimeMS)
		if !same {
			t.Errorf("event %d: live %+v, replay %+v", i, a, b)
		}
	}
	// The replay application's comparison of these events (replay.Compare)
	// is tested end to end by cmd/didoedge's replay tests (--compare).
}

// TestRecordEventModeWithReload records in event mode while a reload
// (what SIGHUP does) switches from thresholds that never alarm to ones that
// alarm on every frame and back: the engine's episode events cut exactly
// one clip, with pre-roll frames before the first episode's frame, every
// episode listed in the clip's metadata, and the file readable by
// Foxglove's reader.
func TestRecordEventModeWithReload(t *testing.T) {
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	section := "record: {mode: event, dir: rec, pre_roll: 1s, post_roll: 300ms, maps: [epistemic]}\n"
	write := func(cal string) {
		text := fmt.Sprintf(testmodels.ConfigYAML, "  url: rtsp://127.0.0.1:1/unused", cal, testmodels.ConfigZones) + section
		if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("quiet.yaml")
	var live eventLog
	p, _, stop := startPipeline(t, s, 15, live.add)
	frames := func() uint64 { return p.Metrics().Camera(0).Frames.Load() }
	waitFor(t, 30*time.Second, "20 quiet frames", func() bool { return frames() >= 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	write("alarm.yaml")
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	n := frames()
	waitFor(t, 30*time.Second, "10 alarmed frames", func() bool { return frames() >= n+10 })
	write("quiet.yaml")
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	n = frames()
	waitFor(t, 30*time.Second, "20 quiet frames after the episodes", func() bool { return frames() >= n+20 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st, _, _ := p.RecordStats()
	files, _ := filepath.Glob(filepath.Join(s.dir, "rec", "rec-*-clip.mcap"))
	if st.Clips != 1 || len(files) != 1 || st.FramesDropped != 0 || st.MessagesDropped != 0 {
		t.Fatalf("clips %d, files %v, stats %+v", st.Clips, files, st)
	}
	var ids []string
	first := uint64(0)
	for _, ev := range live.all() {
		if ev.Type == alerts.EventNew {
			ids = append(ids, ev.ID)
			if first == 0 {
				first = ev.FrameSeq
			}
		}
	}
	if len(ids) != 2 {
		t.Fatalf("episodes %v, want one per zone", ids)
	}
	rep := mcapcheck.Check(t, files[0])
	seqs := rep.Sequences["/front/image"]
	if len(seqs) == 0 || uint64(seqs[0]) >= first || uint64(seqs[len(seqs)-1]) >= uint64(frames()) {
		t.Fatalf("clip frames %v: want pre-roll before the first episode's frame %d and an end before the run's last frame %d", seqs, first, frames())
	}
	if rep.Counts["/front/epistemic"] != len(seqs) || rep.Counts["/front/depth"] != 0 || rep.Counts["/front/events"] != 4 {
		t.Fatalf("counts %v: want one K/S map per frame, no depth, 2 new + 2 end events", rep.Counts)
	}
	got := ""
	var cals []string
	for _, m := range rep.Metadata {
		switch m.Name {
		case "didoedge.episodes":
			got = m.Metadata["ids"]
		case "didoedge.models":
			cals = append(cals, filepath.Base(m.Metadata["calibration_path"]))
		}
	}
	// The clip opened after the first reload and was still open at the
	// second: it names both calibrations, in order.
	if strings.Join(cals, ",") != "alarm.yaml,quiet.yaml" {
		t.Fatalf("didoedge.models calibrations %v, want alarm.yaml then quiet.yaml", cals)
	}
	if r, err := record.ReadRecording(files[0], ""); err != nil || !r.ModelsChanged || filepath.Base(r.Models["calibration_path"]) != "quiet.yaml" {
		t.Fatalf("record.ReadRecording: %+v %v", r, err)
	}
	for _, id := range ids {
		if !strings.Contains(got, id) {
			t.Fatalf("clip episodes %q lack %s", got, id)
		}
	}
}
