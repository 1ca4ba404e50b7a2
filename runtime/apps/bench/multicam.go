package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

// MulticamOptions configure one multi-camera measurement.
type MulticamOptions struct {
	ModelsDir string
	// Cameras is the number of cameras of the simulated rig (simrig.RigCamera).
	Cameras  int
	Duration time.Duration // measured time
	Warmup   time.Duration // discarded start (default 5 s)
	// FPS is each camera's frame rate; 0 (the default) makes every camera
	// free-running: a new frame is captured whenever the pipeline asks
	// for one, so the pipeline alone sets the pace (what the comparison
	// with the bound needs: a camera rate below the models' rate at a
	// quiet moment would cap the pipeline and not the bound).
	FPS float64
	// Frames is how many frames each camera pre-renders and loops
	// (default 8): the cameras cost no CPU beyond copying a frame.
	Frames int
	// Slices is how many times the measured window alternates between
	// the pipeline and the bound (default 5): on a shared machine both
	// then see the same load.
	Slices int
	// BatchSize is the pipeline's pipeline.batch_size (0: its default,
	// min(cameras, 4) for dynamic-batch models on a GPU provider, else 1); the bound runs
	// batches of the size the pipeline uses.
	BatchSize int
	// DynamicBatch runs copies of the models made dynamic-batch by
	// onnx.DynamicBatch (`didoedge model batch`: the same weights), so
	// that frames of several cameras batch.
	DynamicBatch bool
	// ThreadPool and ThreadSpinning are the inference config's
	// thread_pool and thread_spinning for the runs (empty and false: the
	// runtime's defaults, one global pool without spinning), so that the
	// figures can be compared with ONNX Runtime's own default of a
	// spinning pool per session.
	ThreadPool     string
	ThreadSpinning bool
	// Inference, when set, replaces the demo's providers and library (a
	// GPU measurement).
	Inference *onnxrt.Config
	Log       *slog.Logger
}

func (o *MulticamOptions) defaults() {
	if o.Warmup == 0 {
		o.Warmup = 5 * time.Second
	}
	if o.Frames == 0 {
		o.Frames = 8
	}
	if o.Slices == 0 {
		o.Slices = 5
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// CameraRate is one camera's share of a multi-camera run.
type CameraRate struct {
	Name    string  `json:"name"`
	FPS     float64 `json:"fps"`
	Frames  uint64  `json:"frames"`
	Dropped uint64  `json:"dropped"`
}

// MulticamResult is one multi-camera measurement.
type MulticamResult struct {
	Cameras      int          `json:"cameras"`
	AggregateFPS float64      `json:"aggregate_fps"`
	PerCamera    []CameraRate `json:"per_camera"`
	// Spread is (max - min) / mean of the per-camera fps.
	Spread float64 `json:"spread"`
	// BoundFPS is the single-session bound measured in the same process,
	// in slices alternating with the pipeline's (InferenceBound's loop on
	// sessions of its own); Ratio is AggregateFPS / BoundFPS.
	BoundFPS float64 `json:"bound_fps"`
	Ratio    float64 `json:"ratio"`
	// Latency is capture to the frame's alerts assessed and its events
	// queued in the outbox (the frame's publish point), over every frame
	// of the measured window.
	LatencyP50 time.Duration `json:"latency_p50_ns"`
	LatencyP99 time.Duration `json:"latency_p99_ns"`
	// RSSBytes is the process's resident set after the warm-up and the
	// first pipeline slice, before the bound's sessions are opened.
	RSSBytes int64 `json:"rss_bytes"`
	// AllocsPerFrame is the process's heap allocations in the window
	// (every goroutine: cameras, MQTT, broker) per processed frame.
	AllocsPerFrame float64 `json:"allocs_per_frame"`
	// IdleAllocsPerSec is the process's allocation rate before the
	// cameras start (the embedded broker's $SYS topics, MQTT keep-alives,
	// stats and retained states); FrameAllocs is AllocsPerFrame less that
	// background, an estimate of what the frames themselves allocate.
	IdleAllocsPerSec float64 `json:"idle_allocs_per_sec"`
	FrameAllocs      float64 `json:"frame_allocs_estimate"`
	Provider         string  `json:"provider"`
	// BatchSize is the most frames (of different cameras) one model run
	// took, in the pipeline and in the bound.
	BatchSize int `json:"batch_size"`
}

// BoundResult is the single-session throughput bound: the models run
// back to back on the rig's frames, without cameras, scheduler or alerts.
type BoundResult struct {
	BatchSize int           `json:"batch_size"`
	FPS       float64       `json:"fps"`
	Frames    int           `json:"frames"`
	MeanTime  time.Duration `json:"mean_ns"`
	RSSBytes  int64         `json:"rss_bytes"`
	Provider  string        `json:"provider"`
	// Copy and Inference are the host/device copies (StageTimes.Copy) and
	// the models' runs (Depth + AuxUE) per frame, means over the window.
	Copy      time.Duration `json:"copy_ns"`
	Inference time.Duration `json:"inference_ns"`
}

// quietCalibration never alarms: the steady state has no events.
const quietCalibration = `version: 1
tau_e: 1
tau_a: 1000
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}
`

// rigFrames renders frames RGB8 frames of each of n rig cameras (their
// own heading and seed) at the models' input size.
func rigFrames(n, frames, w, h int) ([][][]uint8, error) {
	out := make([][][]uint8, n)
	for i := range n {
		_, heading, off := simrig.RigCamera(i)
		r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: w, Height: h, Seed: 1 + off, Heading: heading})
		if err != nil {
			return nil, err
		}
		f := sim.NewFrame(w, h)
		for k := range frames {
			if err := r.Render(5*k, f); err != nil {
				return nil, err
			}
			out[i] = append(out[i], append([]uint8(nil), f.RGB...))
		}
	}
	return out, nil
}

// multicamConfig is the demo's runtime config for n cameras fed by the
// benchmark (the URLs are never dialled), with a calibration that never
// alarms and the HTTP server off.
func multicamConfig(modelsDir, tmp string, n int, dynamic bool) (*runconfig.Config, *demo.Reference, error) {
	ref, err := demo.ReadReference(modelsDir)
	if err != nil {
		return nil, nil, err
	}
	if dynamic {
		for _, path := range []*string{&ref.DepthModel, &ref.AuxUEModel} {
			m, err := onnx.ReadFile(*path)
			if err != nil {
				return nil, nil, err
			}
			if _, err := onnx.DynamicBatch(m, ""); err != nil {
				return nil, nil, fmt.Errorf("model %q: %w", *path, err)
			}
			out := filepath.Join(tmp, "dynamic-"+filepath.Base(*path))
			if err := onnx.WriteFile(out, m); err != nil {
				return nil, nil, err
			}
			*path = out
		}
	}
	cal := filepath.Join(tmp, "quiet.yaml")
	if err := os.WriteFile(cal, []byte(quietCalibration), 0o644); err != nil {
		return nil, nil, err
	}
	var cams []*simrig.Camera
	for i := range n {
		name, _, _ := simrig.RigCamera(i)
		cams = append(cams, &simrig.Camera{Name: name, URL: "rtsp://127.0.0.1:1/" + name})
	}
	do := demo.Options{ModelsDir: modelsDir, WorkDir: tmp, BrokerListen: "127.0.0.1:0", HTTP: runconfig.HTTPOff, Calibration: cal}
	cfg, err := demo.ConfigForCameras(do, ref, cams)
	return cfg, ref, err
}

// Multicam runs the reference models on o.Cameras simulated cameras in one
// runtime (one session per model) and measures throughput, fairness,
// latency, memory and allocations.
func Multicam(ctx context.Context, o MulticamOptions) (*MulticamResult, error) {
	o.defaults()
	if o.Cameras < 1 || o.Cameras > simrig.MaxCameras {
		return nil, fmt.Errorf("bench multicam: %d cameras outside [1, %d]", o.Cameras, simrig.MaxCameras)
	}
	tmp, err := os.MkdirTemp("", "didoedge-multicam-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cfg, ref, err := multicamConfig(o.ModelsDir, tmp, o.Cameras, o.DynamicBatch)
	if err != nil {
		return nil, err
	}
	cfg.Pipeline.BatchSize = o.BatchSize
	cfg.Inference.ThreadPool, cfg.Inference.ThreadSpinning = o.ThreadPool, o.ThreadSpinning
	applyInference(o.Inference, cfg)
	w, h := ref.Depth.Input.Width, ref.Depth.Input.Height
	frames, err := rigFrames(o.Cameras, o.Frames, w, h)
	if err != nil {
		return nil, err
	}
	var paused atomic.Bool
	boxes := make([]*camera.Mailbox, o.Cameras)
	sources := make([]camera.Source, o.Cameras)
	for i := range boxes {
		if o.FPS > 0 {
			boxes[i] = camera.NewMailbox()
			sources[i] = boxes[i]
		} else {
			sources[i] = &freeRunning{frames: frames[i], w: w, h: h, paused: &paused}
		}
	}
	// Latencies of the measured window, preallocated: OnFrame runs on the
	// pipeline goroutine and must not allocate.
	lat := make([]time.Duration, 0, 1<<20)
	var measuring atomic.Bool
	onFrame := func(ft stream.FrameTiming) {
		if measuring.Load() && len(lat) < cap(lat) {
			lat = append(lat, ft.Done.Sub(ft.Capture))
		}
	}
	p, err := stream.New(ctx, cfg, stream.Options{Sources: sources, Logger: o.Log, OnFrame: onFrame})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	// The background allocation rate: everything but frames.
	var idle0, idle1 runtime.MemStats
	if err := sleep(ctx, time.Second); err != nil {
		cancel()
		return nil, errors.Join(err, <-done)
	}
	runtime.ReadMemStats(&idle0)
	ti := time.Now()
	if err := sleep(ctx, 3*time.Second); err != nil {
		cancel()
		return nil, errors.Join(err, <-done)
	}
	runtime.ReadMemStats(&idle1)
	idleRate := float64(idle1.Mallocs-idle0.Mallocs) / time.Since(ti).Seconds()
	var producers sync.WaitGroup
	for i, mb := range boxes {
		if mb != nil {
			producers.Go(func() { produce(rctx, mb, frames[i], w, h, o.FPS, &paused) })
		}
	}
	stop := func() error {
		cancel()
		producers.Wait()
		return <-done
	}
	if err := sleep(ctx, o.Warmup); err != nil {
		stop()
		return nil, err
	}
	cams := p.Metrics().Cameras()
	frames0 := make([]uint64, len(cams))
	dropped0 := make([]uint64, len(cams))
	perFrames := make([]uint64, len(cams))
	perDropped := make([]uint64, len(cams))
	res := &MulticamResult{Cameras: o.Cameras, IdleAllocsPerSec: idleRate}
	res.Provider, _ = p.Providers()
	slice := max(o.Duration/time.Duration(o.Slices), time.Second)
	var bound *batchBound
	defer func() {
		if bound != nil {
			bound.close()
		}
	}()
	var elapsed, boundTime time.Duration
	var mallocs uint64
	boundFrames, bi := 0, 0
	for sl := range o.Slices {
		// A pipeline slice.
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		for i, cm := range cams {
			frames0[i], dropped0[i] = cm.Frames.Load(), cm.Dropped.Load()
		}
		measuring.Store(true)
		t0 := time.Now()
		if err := sleep(ctx, slice); err != nil {
			stop()
			return nil, err
		}
		measuring.Store(false)
		elapsed += time.Since(t0)
		runtime.ReadMemStats(&ms1)
		mallocs += ms1.Mallocs - ms0.Mallocs
		for i, cm := range cams {
			perFrames[i] += cm.Frames.Load() - frames0[i]
			perDropped[i] += cm.Dropped.Load() - dropped0[i]
		}
		if sl == 0 {
			if res.RSSBytes, err = rssBytes(); err != nil {
				stop()
				return nil, err
			}
			if bound, err = openBound(ctx, cfg, o.Cameras, frames, w, h, o.Log); err != nil {
				stop()
				return nil, err
			}
			res.BatchSize = bound.batch
		}
		// Pause the cameras, let the pipeline finish the frames it holds,
		// then a bound slice: the models back to back on sessions of their own.
		paused.Store(true)
		if err := drain(ctx, cams); err != nil {
			stop()
			return nil, err
		}
		tb := time.Now()
		for time.Since(tb) < slice {
			n, err := bound.run(ctx, bi)
			if err != nil {
				stop()
				return nil, err
			}
			bi++
			boundFrames += n
		}
		boundTime += time.Since(tb)
		paused.Store(false)
		if err := sleep(ctx, 200*time.Millisecond); err != nil { // the cameras deliver again
			stop()
			return nil, err
		}
	}
	var total uint64
	lo, hi := 0.0, 0.0
	for i, cm := range cams {
		r := CameraRate{Name: cm.Camera, Frames: perFrames[i], Dropped: perDropped[i], FPS: float64(perFrames[i]) / elapsed.Seconds()}
		res.PerCamera = append(res.PerCamera, r)
		total += perFrames[i]
		if i == 0 || r.FPS < lo {
			lo = r.FPS
		}
		hi = max(hi, r.FPS)
	}
	res.AggregateFPS = float64(total) / elapsed.Seconds()
	if mean := res.AggregateFPS / float64(len(cams)); mean > 0 {
		res.Spread = (hi - lo) / mean
	}
	res.BoundFPS = float64(boundFrames) / boundTime.Seconds()
	if res.BoundFPS > 0 {
		res.Ratio = res.AggregateFPS / res.BoundFPS
	}
	if total > 0 {
		res.AllocsPerFrame = float64(mallocs) / float64(total)
		res.FrameAllocs = (float64(mallocs) - idleRate*elapsed.Seconds()) / float64(total)
	}
	if err := stop(); err != nil {
		return nil, err
	}
	if len(lat) == 0 {
		return nil, errors.New("bench multicam: no frame processed in the measured window")
	}
	res.LatencyP50, res.LatencyP99 = quantile(lat, 0.50), quantile(lat, 0.99)
	return res, nil
}

// produce publishes the camera's frames at fps into its mailbox, as a
// camera would (the mailbox keeps the newest; the pipeline counts the
// frames it never took as dropped).
func produce(ctx context.Context, mb *camera.Mailbox, frames [][]uint8, w, h int, fps float64, paused *atomic.Bool) {
	defer mb.Close(nil)
	f := camera.Frame{Width: w, Height: h}
	t := time.NewTicker(time.Duration(float64(time.Second) / fps))
	defer t.Stop()
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if paused.Load() {
			continue // no frame, no seq: a pause is not a drop
		}
		seq++
		src := frames[int(seq)%len(frames)]
		if cap(f.RGB) < len(src) {
			f.RGB = make([]uint8, len(src))
		}
		f.RGB = f.RGB[:len(src)]
		copy(f.RGB, src)
		now := time.Now()
		f.Seq, f.Capture, f.Decoded = seq, now, now
		mb.Publish(&f)
	}
}

// freeRunning is a camera that captures a frame whenever it is asked
// (Next): its next pre-rendered frame, stamped now. While paused, Next
// waits.
type freeRunning struct {
	frames [][]uint8
	w, h   int
	seq    uint64
	paused *atomic.Bool
}

// ConsumerPaced: a frame whenever asked, so the pipeline reads the next
// only once it took the last (camera.ConsumerPaced).
func (f *freeRunning) ConsumerPaced() bool { return true }

func (f *freeRunning) Next(ctx context.Context, dst *camera.Frame) error {
	for f.paused.Load() {
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	src := f.frames[int(f.seq)%len(f.frames)]
	if cap(dst.RGB) < len(src) {
		dst.RGB = make([]uint8, len(src))
	}
	dst.RGB = dst.RGB[:len(src)]
	copy(dst.RGB, src)
	f.seq++
	now := time.Now()
	dst.Width, dst.Height, dst.Seq, dst.Capture, dst.Decoded = f.w, f.h, f.seq, now, now
	return nil
}

// drain waits until no camera's frame counter moved for 150 ms: the
// pipeline finished the frames it held.
func drain(ctx context.Context, cams []*stream.CameraMetrics) error {
	sum := func() (n uint64) {
		for _, c := range cams {
			n += c.Frames.Load() + c.Errors.Load() + c.Invalid.Load()
		}
		return n
	}
	last, still := sum(), 0
	for still < 3 {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
		if n := sum(); n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	return nil
}

// batchBound is the single-session bound: the models (sessions of their
// own, the pipeline's batch size) run back to back on frames staged once
// (resized and normalized in advance: in the pipeline that work runs on
// the cameras' goroutines), batches of consecutive cameras in turn.
type batchBound struct {
	m       *stream.Models
	batch   int
	cameras int
	views   []*stream.Models
	staged  [][]*infer.Staged // [camera][frame]
	stb     []*infer.Staged
	scratch []*infer.Models
	times   stream.StageTimes
	// copySum and inferSum add up the batches' copy and run times.
	copySum, inferSum time.Duration
}

func openBound(ctx context.Context, cfg *runconfig.Config, cameras int, frames [][][]uint8, w, h int, log *slog.Logger) (_ *batchBound, err error) {
	m, err := stream.OpenPipelineModels(ctx, cfg, cameras, log)
	if err != nil {
		return nil, err
	}
	b := &batchBound{m: m, batch: m.MaxBatch(), cameras: cameras}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	b.views = []*stream.Models{m}
	for len(b.views) < b.batch {
		v, err := m.Share()
		if err != nil {
			return nil, err
		}
		b.views = append(b.views, v)
	}
	for c := range cameras {
		var sts []*infer.Staged
		for _, f := range frames[c] {
			st := m.NewStaged()
			if err := m.Stage(st, f, w, h); err != nil {
				return nil, err
			}
			sts = append(sts, st)
		}
		b.staged = append(b.staged, sts)
	}
	b.stb, b.scratch = make([]*infer.Staged, b.batch), make([]*infer.Models, b.batch)
	return b, nil
}

// run runs batch i: cameras i*batch ... (mod cameras), each its next
// frame; it returns the frames run.
func (b *batchBound) run(ctx context.Context, i int) (int, error) {
	n := min(b.batch, b.cameras)
	defer func() {
		b.copySum += b.times.Copy
		b.inferSum += b.times.Depth + b.times.AuxUE
	}()
	for k := range n {
		c := (i*n + k) % b.cameras
		sts := b.staged[c]
		b.stb[k] = sts[((i*n+k)/b.cameras)%len(sts)]
	}
	if err := b.m.InferStaged(ctx, b.views[:n], b.stb[:n], b.scratch, &b.times); err != nil {
		return 0, err
	}
	return n, nil
}

func (b *batchBound) close() {
	for _, v := range b.views[1:] {
		v.Close()
	}
	b.m.Close()
}

// InferenceBound runs the reference models back to back, batched as the
// pipeline of that many cameras would (stream.OpenPipelineModels), on
// the rig's frames staged in advance, for o.Duration after o.Warmup: the
// most frames per second one session per model can give, which no
// scheduler can beat.
func InferenceBound(ctx context.Context, o MulticamOptions, cameras int) (*BoundResult, error) {
	o.defaults()
	tmp, err := os.MkdirTemp("", "didoedge-bound-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cameras = max(cameras, 1)
	cfg, ref, err := multicamConfig(o.ModelsDir, tmp, cameras, o.DynamicBatch)
	if err != nil {
		return nil, err
	}
	cfg.Pipeline.BatchSize = o.BatchSize
	cfg.Inference.ThreadPool, cfg.Inference.ThreadSpinning = o.ThreadPool, o.ThreadSpinning
	applyInference(o.Inference, cfg)
	w, h := ref.Depth.Input.Width, ref.Depth.Input.Height
	frames, err := rigFrames(cameras, o.Frames, w, h)
	if err != nil {
		return nil, err
	}
	b, err := openBound(ctx, cfg, cameras, frames, w, h, o.Log)
	if err != nil {
		return nil, err
	}
	defer b.close()
	run := func(d time.Duration) (int, time.Duration, error) {
		t0 := time.Now()
		n := 0
		for i := 0; time.Since(t0) < d; i++ {
			if err := ctx.Err(); err != nil {
				return n, 0, err
			}
			k, err := b.run(ctx, i)
			if err != nil {
				return n, 0, err
			}
			n += k
		}
		return n, time.Since(t0), nil
	}
	if _, _, err := run(o.Warmup); err != nil {
		return nil, err
	}
	b.copySum, b.inferSum = 0, 0
	n, el, err := run(o.Duration)
	if err != nil {
		return nil, err
	}
	res := &BoundResult{BatchSize: b.batch, FPS: float64(n) / el.Seconds(), Frames: n, MeanTime: el / time.Duration(max(n, 1)),
		Copy: b.copySum / time.Duration(max(n, 1)), Inference: b.inferSum / time.Duration(max(n, 1))}
	res.Provider = b.m.DepthSession().Provider()
	if res.RSSBytes, err = rssBytes(); err != nil {
		return nil, err
	}
	return res, nil
}
