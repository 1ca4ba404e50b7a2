// Package bench measures the running system end to end: frame-to-MQTT
// latency through the simulated RTSP camera, the pipeline and a real MQTT
// subscriber, its ratio to the model inference time, and memory and
// goroutine stability over a soak.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

// Options configure a measurement.
type Options struct {
	ModelsDir     string        // reference models (depth.onnx, depth.yaml, auxue.onnx, MANIFEST)
	Width, Height int           // camera and model input size
	FPS           float64       // camera rate (default 15)
	Duration      time.Duration // measured time
	Warmup        time.Duration // discarded start (default 5 s)
	Log           *slog.Logger
	// Precompute > 0 pre-renders that many frames per scene and loops
	// them, so that rendering the world does not load the CPU.
	Precompute int
	// Progress, when set, receives soak samples as they are taken.
	Progress func(SoakSample)
	// Inference, when set, replaces the demo's inference providers (CPU)
	// and, when it names one, its library: a GPU measurement.
	Inference *onnxrt.Config
	// Record, when set, turns the pipeline's recorder on with this
	// section (its dir is replaced by a temporary one): Latency then
	// reports the recording's cost (LatencyReport.Record).
	Record *record.Config
}

// alarmCalibration puts every zone in a critical episode on every frame,
// and with a 1 ms update interval each frame raises one update event per
// zone: every frame is published, so every frame's latency is measured.
const alarmCalibration = `version: 1
tau_e: 0.000001
tau_a: 1000
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}
`

// system is a running demo system: camera, pipeline, broker.
type system struct {
	cam      *simrig.Camera
	pipeline *stream.Pipeline
	tmp      string
	done     chan error
	cancel   context.CancelFunc
}

func start(ctx context.Context, o Options, phases []simrig.Phase, forceEvents bool, onFrame func(stream.FrameTiming), onEvent func(*alerts.Event)) (*system, error) {
	tmp, err := os.MkdirTemp("", "didoedge-bench-")
	if err != nil {
		return nil, err
	}
	s := &system{tmp: tmp}
	do := demo.Options{ModelsDir: o.ModelsDir, WorkDir: tmp, BrokerListen: "127.0.0.1:0",
		HTTP: runconfig.HTTPOff, FPS: o.FPS, Phases: phases, Logger: o.Log, Precompute: o.Precompute}
	if forceEvents {
		// One zone: one event (one outbox fsync) per frame.
		do.Zones = []alerts.ZoneSpec{{Name: "frame", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}
		do.Calibration = tmp + "/alarm.yaml"
		do.UpdateInterval = time.Millisecond
		if err := os.WriteFile(do.Calibration, []byte(alarmCalibration), 0o644); err != nil {
			s.close()
			return nil, err
		}
	}
	if s.cam, err = simrig.StartCamera(do.Rig(), o.Width, o.Height); err != nil {
		s.close()
		return nil, err
	}
	cfg, err := demo.Config(do, s.cam.URL)
	if err != nil {
		s.close()
		return nil, err
	}
	applyInference(o.Inference, cfg)
	if o.Record != nil {
		rc := *o.Record
		rc.Dir = filepath.Join(tmp, "recordings")
		cfg.Record = rc.WithDefaults()
		if err := cfg.Record.Validate("record"); err != nil {
			s.close()
			return nil, err
		}
	}
	if s.pipeline, err = stream.New(ctx, cfg, stream.Options{Logger: o.Log, OnFrame: onFrame, OnEvent: onEvent}); err != nil {
		s.close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.done = make(chan error, 1)
	go func() { s.done <- s.pipeline.Run(rctx) }()
	return s, nil
}

// stop drains the pipeline and removes the temporary files.
func (s *system) stop() error {
	var err error
	if s.cancel != nil {
		s.cancel()
		err = <-s.done
	}
	s.close()
	return err
}

func (s *system) close() {
	if s.cam != nil {
		s.cam.Server.Close()
	}
	os.RemoveAll(s.tmp)
}

func (o *Options) defaults() {
	if o.FPS == 0 {
		o.FPS = 15
	}
	if o.Warmup == 0 {
		o.Warmup = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// LatencyReport are the figures of one latency run.
type LatencyReport struct {
	Frames   int     // frames whose event the subscriber received (after warm-up)
	FPS      float64 // assessed frames per second
	Dropped  uint64  // frames the pipeline never took (latest-frame policy)
	Provider string
	// Capture to MQTT message received by the subscriber.
	LatencyP50, LatencyP99 time.Duration
	// Depth + AuxUE run time of the same frames.
	InferP50, InferP99 time.Duration
	// Capture to pipeline start (transport, decode, mailbox wait) and
	// capture to events queued in the outbox (mean, whole run).
	CameraMean, PipelineMean time.Duration
	// Stages are the mean durations of every pipeline stage.
	Stages map[string]time.Duration
	// Ratio is LatencyP50 / InferP50.
	Ratio float64
	// Pipeline taking the frame to the message received: the runtime's own
	// path (preprocessing, both models, read-outs, alerts, outbox fsync,
	// MQTT), without the camera transport and the latest-frame wait.
	RuntimeP50, RuntimeP99 time.Duration
	RuntimeRatio           float64 // RuntimeP50 / InferP50
	// The runtime path in two parts: pipeline taking the frame to its
	// first event durable in the outbox and signalled to the publisher
	// (frame to publish), and from there to the subscriber (the
	// publisher's goroutine, the broker and the subscriber's client).
	QueuedP50, HopP50 time.Duration
	QueuedRatio       float64 // QueuedP50 / InferP50
	// Record is the recording's cost over the measured time (nil when
	// Options.Record is nil).
	Record *RecordReport
}

// RecordReport is what recording cost in a latency run, measured over the
// same frames as the pipeline's figures.
type RecordReport struct {
	Written, Dropped uint64  // recorder frames written and dropped (queue full)
	BytesPerSecond   float64 // bytes added to the recordings per second
	BytesPerFrame    float64
	// WorkerCPU is the recorder thread's CPU time per written frame
	// (encoding, compression, writes); Call the pipeline goroutine's time
	// per frame handing it over (the copy).
	WorkerCPU, Call time.Duration
	// Pipeline is the pipeline's own per-frame processing time
	// (preprocess, depth, AuxUE, read-outs, alerts: the mean of the
	// stages) over the same window.
	Pipeline time.Duration
	// Ratio is (WorkerCPU + Call) / Pipeline (goal <= 0.1).
	Ratio float64
}

// windowMean is the mean of the observations a histogram got between two
// readings of its count and mean.
func windowMean(n0 uint64, m0 time.Duration, h *stream.Histogram) time.Duration {
	n1, m1 := h.Count(), h.Mean()
	if n1 <= n0 {
		return 0
	}
	return time.Duration((float64(m1)*float64(n1) - float64(m0)*float64(n0)) / float64(n1-n0))
}

// Latency runs the camera at o.FPS with every frame raising events, and
// measures capture -> message received by a paho subscriber on the broker.
func Latency(ctx context.Context, o Options) (*LatencyReport, error) {
	o.defaults()
	var mu sync.Mutex
	frames := map[uint64]stream.FrameTiming{}
	onFrame := func(ft stream.FrameTiming) {
		mu.Lock()
		frames[ft.Seq] = ft
		mu.Unlock()
	}
	// queued: when the frame's first event was durable in the outbox and
	// signalled to the publisher (the engine's sinks call OnEvent after
	// the outbox's Append returned).
	queuedAt := map[uint64]time.Time{}
	onEvent := func(ev *alerts.Event) {
		at := time.Now()
		mu.Lock()
		if _, ok := queuedAt[ev.FrameSeq]; !ok {
			queuedAt[ev.FrameSeq] = at
		}
		mu.Unlock()
	}
	outdoor := []simrig.Phase{{Name: "outdoor", World: "outdoor", Duration: time.Hour}}
	sys, err := start(ctx, o, outdoor, true, onFrame, onEvent)
	if err != nil {
		return nil, err
	}
	defer sys.stop()

	type recv struct {
		seq uint64
		at  time.Time
	}
	var rmu sync.Mutex
	var received []recv
	seen := map[uint64]bool{}
	opts := mqtt.NewClientOptions().AddBroker("tcp://" + sys.pipeline.BrokerAddr()).
		SetClientID("didoedge-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)).SetCleanSession(true)
	client := mqtt.NewClient(opts)
	if tok := client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("bench subscriber: connect: %v", tok.Error())
	}
	defer client.Disconnect(100)
	topic := sys.pipeline.Topics().Events(sys.pipeline.Camera())
	tok := client.Subscribe(topic, 1, func(_ mqtt.Client, m mqtt.Message) {
		at := time.Now()
		var ev struct {
			FrameSeq uint64 `json:"frame_seq"`
		}
		if json.Unmarshal(m.Payload(), &ev) != nil {
			return
		}
		rmu.Lock()
		if !seen[ev.FrameSeq] { // the first event of a frame is its latency
			seen[ev.FrameSeq] = true
			received = append(received, recv{ev.FrameSeq, at})
		}
		rmu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("bench subscriber: subscribe %s: %v", topic, tok.Error())
	}
	if err := sleep(ctx, o.Warmup); err != nil {
		return nil, err
	}
	m := sys.pipeline.Metrics().Camera(0)
	startFrames, startDropped := m.Frames.Load(), m.Dropped.Load()
	rs0, call0, recording := sys.pipeline.RecordStats()
	var stageN [stream.StageAlerts + 1]uint64
	var stageM [stream.StageAlerts + 1]time.Duration
	for st := stream.StagePreprocess; st <= stream.StageAlerts; st++ {
		stageN[st], stageM[st] = m.Stages[st].Count(), m.Stages[st].Mean()
	}
	rmu.Lock()
	skip := len(received)
	rmu.Unlock()
	t0 := time.Now()
	if err := sleep(ctx, o.Duration); err != nil {
		return nil, err
	}
	elapsed := time.Since(t0)
	rep := &LatencyReport{FPS: float64(m.Frames.Load()-startFrames) / elapsed.Seconds(), Dropped: m.Dropped.Load() - startDropped,
		CameraMean: m.Stages[stream.StageCamera].Mean(), PipelineMean: m.Latency.Mean()}
	if recording {
		rs1, call1, _ := sys.pipeline.RecordStats()
		r := &RecordReport{Written: rs1.FramesWritten - rs0.FramesWritten, Dropped: rs1.FramesDropped - rs0.FramesDropped,
			BytesPerSecond: float64(rs1.BytesWritten-rs0.BytesWritten) / elapsed.Seconds()}
		submitted := rs1.FramesSubmitted - rs0.FramesSubmitted
		for st := stream.StagePreprocess; st <= stream.StageAlerts; st++ {
			r.Pipeline += windowMean(stageN[st], stageM[st], &m.Stages[st])
		}
		if r.Written > 0 && submitted > 0 && r.Pipeline > 0 {
			r.BytesPerFrame = float64(rs1.BytesWritten-rs0.BytesWritten) / float64(r.Written)
			r.WorkerCPU = (rs1.WorkerCPU - rs0.WorkerCPU) / time.Duration(r.Written)
			r.Call = (call1 - call0) / time.Duration(submitted)
			r.Ratio = float64(r.WorkerCPU+r.Call) / float64(r.Pipeline)
		}
		rep.Record = r
	}
	rep.Provider, _ = sys.pipeline.Providers()
	rep.Stages = map[string]time.Duration{}
	for st := stream.StageCamera; st <= stream.StageAlerts; st++ {
		rep.Stages[st.String()] = m.Stages[st].Mean()
	}
	rmu.Lock()
	got := append([]recv(nil), received[skip:]...)
	rmu.Unlock()
	var lat, inf, run, queued, hop []time.Duration
	mu.Lock()
	for _, r := range got {
		if ft, ok := frames[r.seq]; ok {
			lat = append(lat, r.at.Sub(ft.Capture))
			inf = append(inf, ft.Inference)
			run = append(run, r.at.Sub(ft.Start))
			if q, ok := queuedAt[r.seq]; ok {
				queued = append(queued, q.Sub(ft.Start))
				hop = append(hop, r.at.Sub(q))
			}
		}
	}
	mu.Unlock()
	if len(lat) == 0 {
		return nil, fmt.Errorf("bench: the subscriber received no event in %v", o.Duration)
	}
	rep.Frames = len(lat)
	rep.LatencyP50, rep.LatencyP99 = quantile(lat, 0.5), quantile(lat, 0.99)
	rep.InferP50, rep.InferP99 = quantile(inf, 0.5), quantile(inf, 0.99)
	rep.Ratio = float64(rep.LatencyP50) / float64(rep.InferP50)
	rep.RuntimeP50, rep.RuntimeP99 = quantile(run, 0.5), quantile(run, 0.99)
	rep.RuntimeRatio = float64(rep.RuntimeP50) / float64(rep.InferP50)
	if len(queued) > 0 {
		rep.QueuedP50, rep.HopP50 = quantile(queued, 0.5), quantile(hop, 0.5)
		rep.QueuedRatio = float64(rep.QueuedP50) / float64(rep.InferP50)
	}
	return rep, nil
}

func quantile(v []time.Duration, q float64) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	k := max(0, min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1))
	return s[k]
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SoakSample is one observation of a soak run.
type SoakSample struct {
	Elapsed    time.Duration
	RSSBytes   int64
	Goroutines int
	Frames     uint64
	Events     uint64
}

// SoakReport summarizes a soak run: RSS and goroutines after the warm-up
// (the baseline) and at the end.
type SoakReport struct {
	Samples                       []SoakSample
	BaseRSS, EndRSS, MaxRSS       int64
	Growth                        float64 // (EndRSS - BaseRSS) / BaseRSS
	BaseGoroutines, EndGoroutines int
	Frames                        uint64
}

// Soak runs the demo scenario (outdoor, fog, indoor...) for o.Duration
// after o.Warmup, sampling RSS and goroutines every interval.
func Soak(ctx context.Context, o Options, interval time.Duration) (*SoakReport, error) {
	o.defaults()
	sc := simrig.DefaultScenario()
	// Shorter phases so that a short soak still crosses every scene.
	for i := range sc {
		sc[i].Duration = max(2*time.Second, min(sc[i].Duration, o.Duration/8))
	}
	sys, err := start(ctx, o, sc, false, nil, nil)
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	pm := sys.pipeline.Metrics()
	m := pm.Camera(0)
	t0 := time.Now()
	if err := sleep(ctx, o.Warmup); err != nil {
		return nil, err
	}
	rep := &SoakReport{}
	sample := func() (SoakSample, error) {
		runtime.GC()
		rss, err := rssBytes()
		if err != nil {
			return SoakSample{}, err
		}
		var events uint64
		var b strings.Builder
		pm.WriteTo(&b)
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(line, "didoedge_events_total{") {
				if f := strings.Fields(line); len(f) == 2 {
					n, _ := strconv.ParseUint(f[1], 10, 64)
					events += n
				}
			}
		}
		s := SoakSample{Elapsed: time.Since(t0), RSSBytes: rss, Goroutines: runtime.NumGoroutine(), Frames: m.Frames.Load(), Events: events}
		if o.Progress != nil {
			o.Progress(s)
		}
		return s, nil
	}
	base, err := sample()
	if err != nil {
		return nil, err
	}
	rep.Samples = append(rep.Samples, base)
	end := time.Now().Add(o.Duration)
	for time.Now().Before(end) {
		if err := sleep(ctx, min(interval, time.Until(end))); err != nil {
			return nil, err
		}
		s, err := sample()
		if err != nil {
			return nil, err
		}
		rep.Samples = append(rep.Samples, s)
	}
	last := rep.Samples[len(rep.Samples)-1]
	rep.BaseRSS, rep.EndRSS = base.RSSBytes, last.RSSBytes
	for _, s := range rep.Samples {
		rep.MaxRSS = max(rep.MaxRSS, s.RSSBytes)
	}
	rep.Growth = float64(rep.EndRSS-rep.BaseRSS) / float64(rep.BaseRSS)
	rep.BaseGoroutines, rep.EndGoroutines = base.Goroutines, last.Goroutines
	rep.Frames = last.Frames - base.Frames
	if rep.Frames == 0 {
		return rep, fmt.Errorf("soak: no frame assessed in %v", o.Duration)
	}
	return rep, nil
}

// rssBytes reads the resident set size from /proc/self/status.
func rssBytes() (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read RSS: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("read RSS: no VmRSS line in /proc/self/status")
}

// applyInference puts a benchmark's providers and library (inf, nil: the
// demo's CPU provider) into the runtime config.
func applyInference(inf *onnxrt.Config, cfg *runconfig.Config) {
	if inf == nil {
		return
	}
	if len(inf.Providers) > 0 {
		cfg.Inference.Providers = inf.Providers
	}
	if inf.Library != "" {
		cfg.Inference.Library = inf.Library
	}
	if inf.DeviceTensors != "" {
		cfg.Inference.DeviceTensors = inf.DeviceTensors
	}
}
