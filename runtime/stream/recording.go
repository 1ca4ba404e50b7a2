package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/camera/intrinsics"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/schema"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/record/upload"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// Names of the recorder's JSON streams (topics /<camera>/events and
// /<camera>/zone_states).
const (
	recordEventsStream = "events"
	recordStatesStream = "zone_states"
	// replayModelsMetadata names the models and calibration of a
	// recording (runtime/record/mcaprec.ModelsMetadata).
	replayModelsMetadata = "didoedge.models"
)

// recorderHook connects the pipeline to the MCAP recorder (the record:
// section): every assessed frame with its maps, and, as an alerts.Sink
// placed after the durable MQTT sink, every event (with its seq) and zone
// state, plus the episode notices that cut event-mode clips. All methods
// are safe on a nil hook (recording off) and safe for concurrent use, so
// that one hook serves every camera: the camera is a parameter
// everywhere. Nothing here blocks the pipeline: the recorder drops and
// counts what its bounded queues cannot take.
type recorderHook struct {
	rec  *record.Recorder
	log  *slog.Logger
	intr []float64 // record.intrinsics: fx, fy, cx, cy of every camera's frames; nil: per camera
	// cams are the cameras' own intrinsics (camera.intrinsics or
	// intrinsics_file), used when record.intrinsics is empty; scaled to
	// each frame size (camera/intrinsics).
	cams map[string]intrinsics.Intrinsics

	mu   sync.Mutex
	size map[string][2]int // camera -> frame size the intrinsics were sent for

	callNS atomic.Int64 // time spent in Frame calls on the pipeline goroutine
}

// newRecorderHook starts the recorder when cfg.Record enables it (nil
// hook otherwise). The models' sha256 and each camera's own calibration
// file are recorded as the "didoedge.models" metadata of every file
// (record.RunIdentity).
func newRecorderHook(cfg *runconfig.Config, specs []runconfig.CameraSpec, log *slog.Logger) (*recorderHook, error) {
	if !cfg.Record.Enabled() {
		return nil, nil
	}
	cams := make([]record.CameraFile, len(specs))
	for i, cs := range specs {
		cams[i] = record.CameraFile{Camera: cs.Name, Calibration: cs.Alerts.Calibration}
	}
	ident, err := modelIdentity(cfg, cams)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	events, err := schema.Raw(schema.Event)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	states, err := schema.Raw(schema.State)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	rec, err := record.New(cfg.Record, record.Options{
		Streams: []record.JSONStream{
			{Name: recordEventsStream, SchemaName: alerts.EventSchemaID, Schema: events},
			{Name: recordStatesStream, SchemaName: alerts.StateSchemaID, Schema: states},
		},
		Metadata: map[string]map[string]string{replayModelsMetadata: ident},
		Logger:   log,
		// record.upload: objects <prefix>/<vehicle>/<camera>/<file>; the
		// storage's client comes from the environment (internal/objstore).
		Vehicle: cfg.AlertsConfig.Vehicle,
	})
	if err != nil {
		return nil, err
	}
	log.Info("recording", "mode", cfg.Record.Mode, "dir", cfg.Record.Dir, "frame_format", cfg.Record.FrameFormat, "maps", cfg.Record.Maps)
	if u := cfg.Record.Upload; u != nil {
		log.Info("recording: uploads", "target", u.Target, "queue", u.Dir, "max_bytes", u.MaxBytes)
	}
	h := &recorderHook{rec: rec, log: log, intr: cfg.Record.Intrinsics, size: map[string][2]int{}, cams: map[string]intrinsics.Intrinsics{}}
	for _, cs := range specs {
		if in := cs.Source.Intrinsics; in != nil && h.intr == nil {
			h.cams[cs.Name] = *in
		}
	}
	return h, nil
}

// addCamera makes a camera added at run time known: its own intrinsics
// become its recorded calibration (as at start). Scheduler goroutine.
func (h *recorderHook) addCamera(cs runconfig.CameraSpec) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if in := cs.Source.Intrinsics; in != nil && h.intr == nil {
		h.cams[cs.Name] = *in
	}
}

// removeCamera forgets a camera removed at run time (a camera added again
// under its name sends its intrinsics again). Scheduler goroutine.
func (h *recorderHook) removeCamera(name string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.cams, name)
	delete(h.size, name)
}

// modelIdentity is the didoedge.models metadata of a run: sha256 of the
// depth model, the AuxUE and every camera's calibration file.
func modelIdentity(cfg *runconfig.Config, cams []record.CameraFile) (map[string]string, error) {
	return record.RunIdentity(cfg.Depth.Model, cfg.AuxUE.Model, cams)
}

// calibrations lists each camera's calibration file.
func calibrations(specs []runconfig.CameraSpec) []record.CameraFile {
	out := make([]record.CameraFile, len(specs))
	for i, cs := range specs {
		out[i] = record.CameraFile{Camera: cs.Name, Calibration: cs.Alerts.Calibration}
	}
	return out
}

// identity is the didoedge.models metadata a reload to cfg with these
// calibrations will record (nil, nil when recording is off): computed
// before the reload changes anything, so that a calibration that cannot
// be identified refuses the reload.
func (h *recorderHook) identity(cfg *runconfig.Config, cams []record.CameraFile) (map[string]string, error) {
	if h == nil {
		return nil, nil
	}
	return modelIdentity(cfg, cams)
}

// setIdentity records the calibrations a reload swapped in: files from
// now on, and the open one from this point, name them.
func (h *recorderHook) setIdentity(ident map[string]string) {
	if h == nil {
		return
	}
	h.rec.SetMetadata(replayModelsMetadata, ident)
}

// sinks returns the hook as an alerts sink (none when recording is off).
func (h *recorderHook) sinks() []alerts.Sink {
	if h == nil {
		return nil
	}
	return []alerts.Sink{h}
}

// frame hands one assessed frame of a camera and the models' maps to the
// recorder: a copy into a free slot, or a counted drop. It never blocks.
// The recorder takes the maps on the grids the models computed them on
// (map_resolution computed) or at the frame's size; a relative model's
// maps are recorded as the model gave them (relative inverse depth), not
// as the alerts' relative depth.
func (h *recorderHook) frame(cameraID string, f *camera.Frame, m infer.Maps) {
	if h == nil {
		return
	}
	t0 := time.Now()
	if h.intr != nil || len(h.cams) > 0 {
		h.setCamera(cameraID, f.Width, f.Height)
	}
	n := &m.Native
	h.rec.Frame(&record.Frame{Camera: cameraID, Seq: f.Seq, Capture: f.Capture, Width: f.Width, Height: f.Height, RGB: f.RGB,
		MapWidth: m.Width, MapHeight: m.Height, Depth: m.Depth, Scale: m.Scale, Epistemic: m.Epistemic, Relative: m.Relative,
		Computed: record.ComputedMaps{Grid: n.Geometry, DepthWidth: n.DepthW, DepthHeight: n.DepthH, Depth: n.Depth,
			AuxWidth: n.AuxW, AuxHeight: n.AuxH, Scale: n.Scale, Epistemic: n.Epistemic}})
	h.callNS.Add(int64(time.Since(t0)))
}

// setCamera sends a camera's intrinsics before its first frame and after
// its frame size changed.
func (h *recorderHook) setCamera(cameraID string, w, ht int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.size[cameraID] == [2]int{w, ht} {
		return
	}
	var in record.Intrinsics
	if h.intr != nil {
		in = record.Intrinsics{Width: w, Height: ht, Fx: h.intr[0], Fy: h.intr[1], Cx: h.intr[2], Cy: h.intr[3]}
	} else if ci, ok := h.cams[cameraID]; ok {
		s := ci.Scaled(w, ht)
		in = record.Intrinsics{Width: w, Height: ht, Fx: s.Fx, Fy: s.Fy, Cx: s.Cx, Cy: s.Cy}
	} else {
		return
	}
	if err := h.rec.SetCamera(cameraID, in); err != nil {
		h.log.Warn("recording: camera intrinsics not recorded", "camera", cameraID, "err", err)
		return
	}
	h.size[cameraID] = [2]int{w, ht}
}

// Event implements alerts.Sink: the event as published on MQTT (with the
// outbox's seq) on /<camera>/events, and the episode notice.
func (h *recorderHook) Event(ev *alerts.Event) error {
	t := time.UnixMilli(ev.TimeMS)
	switch ev.Type {
	case alerts.EventNew:
		h.rec.EpisodeOpened(ev.ID, t)
	case alerts.EventUpdate:
		h.rec.EpisodeUpdated(ev.ID, t)
	case alerts.EventEnd:
		h.rec.EpisodeEnded(ev.ID, t)
	}
	return h.json(ev.Camera, recordEventsStream, t, ev)
}

// State implements alerts.Sink: the zone state on /<camera>/zone_states.
func (h *recorderHook) State(st *alerts.State) error {
	return h.json(st.Camera, recordStatesStream, time.UnixMilli(st.TimeMS), st)
}

func (h *recorderHook) json(cameraID, stream string, t time.Time, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("record %s: %w", stream, err)
	}
	// A full queue is counted (didoedge_record_messages_dropped_total),
	// not an error of the engine's delivery.
	h.rec.JSON(cameraID, stream, t, data)
	return nil
}

// registerMetrics exports the recorder's counters as didoedge_record_*.
func (h *recorderHook) registerMetrics(m *Metrics) {
	if h == nil {
		return
	}
	st := h.rec.Stats
	for _, c := range []struct {
		name, help string
		fn         func(record.Stats) float64
	}{
		{"didoedge_record_frames_submitted_total", "Assessed frames handed to the recorder.", func(s record.Stats) float64 { return float64(s.FramesSubmitted) }},
		{"didoedge_record_frames_dropped_total", "Frames the recorder dropped (queue full) rather than delay the pipeline.", func(s record.Stats) float64 { return float64(s.FramesDropped) }},
		{"didoedge_record_frames_written_total", "Frames whose image reached a recording.", func(s record.Stats) float64 { return float64(s.FramesWritten) }},
		{"didoedge_record_messages_dropped_total", "Events, zone states and episode notices the recorder's queue could not take.", func(s record.Stats) float64 { return float64(s.MessagesDropped) }},
		{"didoedge_record_write_errors_total", "Failed recording writes, creates, closes or deletes.", func(s record.Stats) float64 { return float64(s.WriteErrors) }},
		{"didoedge_record_files_closed_total", "Recordings completed with their summary.", func(s record.Stats) float64 { return float64(s.FilesClosed) }},
		{"didoedge_record_files_deleted_total", "Recordings deleted to stay within record.budget_bytes.", func(s record.Stats) float64 { return float64(s.FilesDeleted) }},
		{"didoedge_record_bytes_written_total", "Bytes of the completed recordings and the open one.", func(s record.Stats) float64 { return float64(s.BytesWritten) }},
		{"didoedge_record_clips_total", "Event mode: clips opened.", func(s record.Stats) float64 { return float64(s.Clips) }},
		{"didoedge_record_worker_cpu_seconds_total", "CPU time of the recorder's thread (encoding, compression, writes).", func(s record.Stats) float64 { return s.WorkerCPU.Seconds() }},
	} {
		m.CounterFunc(c.name, c.help, func() float64 { return c.fn(st()) })
	}
	m.CounterFunc("didoedge_record_frame_call_seconds_total", "Time the pipeline spent handing frames to the recorder (copies).",
		func() float64 { return time.Duration(h.callNS.Load()).Seconds() })
	m.Gauge("didoedge_record_queue_frames", "Frames waiting for the recorder.", func() float64 { return float64(st().QueueLength) })
	if q := h.rec.Uploads(); q != nil {
		// The queue's own (didoedge_upload_*), and the recorder's side of
		// the handover.
		m.Register(upload.Collectors(q.Stats, time.Now)...)
		m.CounterFunc("didoedge_record_upload_queued_files_total", "Finished recordings moved into the upload queue.",
			func() float64 { return float64(st().UploadQueued) })
		m.Gauge("didoedge_record_upload_waiting_files", "Finished recordings waiting in record.dir for room in the upload queue (record.upload.max_bytes).",
			func() float64 { return float64(st().UploadWaiting) })
		m.CounterFunc("didoedge_record_upload_discarded_files_total", "Finished recordings deleted by record.budget_bytes before the full upload queue could take them (never uploaded).",
			func() float64 { return float64(st().UploadDiscarded) })
	}
}

// startUploads runs the recorder's upload queue (record.upload) under
// the pipeline's context until the returned stop is called: Run stops it
// as it returns, before Close hands the last file to the queue. An upload
// cut short resumes at the next start (the queue is on disk; a multipart
// upload goes on from the parts the server holds).
func (h *recorderHook) startUploads(ctx context.Context) (stop func()) {
	if h == nil || h.rec.Uploads() == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.rec.RunUploads(ctx); err != nil {
			h.log.Error("recording: uploads stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// stats returns the recorder's counters and the time spent in Frame calls.
func (h *recorderHook) stats() (record.Stats, time.Duration) {
	if h == nil {
		return record.Stats{}, 0
	}
	return h.rec.Stats(), time.Duration(h.callNS.Load())
}

// close completes the open recording (after the alert engine's last
// events were recorded).
func (h *recorderHook) close(ctx context.Context) error {
	if h == nil {
		return nil
	}
	err := h.rec.Close(ctx)
	s := h.rec.Stats()
	h.log.Info("recording closed", "frames_written", s.FramesWritten, "frames_dropped", s.FramesDropped,
		"messages_dropped", s.MessagesDropped, "files", s.FilesClosed, "bytes", s.BytesWritten, "write_errors", s.WriteErrors)
	return err
}

// RecordStats returns the recorder's counters and the time the pipeline
// spent handing frames to it; ok is false when recording is off.
func (p *Pipeline) RecordStats() (st record.Stats, frameCalls time.Duration, ok bool) {
	if p.rec == nil {
		return record.Stats{}, 0, false
	}
	st, frameCalls = p.rec.stats()
	return st, frameCalls, true
}
