package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
	"github.com/didoedge/didoedge/runtime/record"
)

// InferenceFlags are --providers and --library of the measurements that
// may leave the demo's CPU provider.
type InferenceFlags struct {
	Providers, Library, DeviceTensors string
}

// AddFlags declares the flags on fs.
func (f *InferenceFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Providers, "providers", "", "execution providers in order, e.g. cuda:required or cuda,cpu (\":required\": no fallback); empty: the demo's cpu")
	fs.StringVar(&f.DeviceTensors, "device-tensors", "", "inference.device_tensors: auto (device-resident tensors when both models run on cuda), on (also over host memory on the cpu), off (host tensors); empty: the config's, auto")
	fs.StringVar(&f.Library, "library", "", "ONNX Runtime library (default: $ONNXRUNTIME_LIB, then third_party/: the GPU build first when a GPU provider is named)")
}

// Config is the inference override the flags give (Options.Inference);
// nil when neither is set: the demo's CPU provider and library resolution.
func (f *InferenceFlags) Config() (*onnxrt.Config, error) {
	if f.Providers == "" && f.Library == "" && f.DeviceTensors == "" {
		return nil, nil
	}
	c, err := onnxrt.ParseProviders(f.Providers, f.Library)
	if err != nil {
		return nil, fmt.Errorf("--providers %q: %w", f.Providers, err)
	}
	c.DeviceTensors = f.DeviceTensors
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("--device-tensors: %w", err)
	}
	return &c, nil
}

// LatencyFlags are the flags of `didoedge bench latency` and `bench soak`
// (Mode, set before AddFlags: its duration's default differs).
type LatencyFlags struct {
	Mode                       string
	Models, Record, CPUProfile string
	FPS, MaxGrowth             float64
	Duration, Warmup, Interval time.Duration
	Precompute, RecordQuality  int
	Inference                  InferenceFlags
}

// AddFlags declares the flags on fs.
func (f *LatencyFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Models, "models", "models", "reference models directory")
	fs.Float64Var(&f.FPS, "fps", 15, "simulated camera frame rate")
	dflt := time.Minute
	if f.Mode == "soak" {
		dflt = 10 * time.Minute
	}
	fs.DurationVar(&f.Duration, "duration", dflt, "measured time (after the warm-up)")
	fs.DurationVar(&f.Warmup, "warmup", 10*time.Second, "discarded start")
	fs.DurationVar(&f.Interval, "interval", 30*time.Second, "soak: sampling interval")
	fs.Float64Var(&f.MaxGrowth, "max-growth", 5, "soak: fail above this RSS growth in percent")
	fs.IntVar(&f.Precompute, "precompute", 45, "pre-render this many frames per scene and loop them (0: render live)")
	fs.StringVar(&f.Record, "record", "", "latency: record every frame continuously in this frame format (jpeg or png; the record: defaults otherwise) and report the recording's cost")
	fs.IntVar(&f.RecordQuality, "record-quality", 0, "latency --record jpeg: JPEG quality (default 90)")
	fs.StringVar(&f.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	f.Inference.AddFlags(fs)
}

// Run measures what the flags say with the inference override inf
// (InferenceFlags.Config) and writes the report to w; a soak fails when
// the RSS grew by more than --max-growth.
func (f *LatencyFlags) Run(ctx context.Context, inf *onnxrt.Config, w io.Writer, log *slog.Logger) error {
	if err := demo.CheckLibrary(); err != nil {
		return err
	}
	ref, err := demo.ReadReference(f.Models)
	if err != nil {
		return err
	}
	spec := ref.Depth
	o := Options{ModelsDir: f.Models, Width: spec.Input.Width, Height: spec.Input.Height, FPS: f.FPS,
		Duration: f.Duration, Warmup: f.Warmup, Log: log, Precompute: f.Precompute, Inference: inf}
	if f.Record != "" {
		if f.Mode != "latency" {
			return errors.New("--record: bench latency only")
		}
		o.Record = &record.Config{Mode: record.ModeContinuous, FrameFormat: f.Record, JPEGQuality: f.RecordQuality}
	}
	if f.Mode == "latency" {
		fmt.Fprintf(w, "bench latency: models %s, camera %dx%d at %g fps over RTSP (%d pre-rendered frames), every frame published; %v after %v warm-up\n",
			f.Models, spec.Input.Width, spec.Input.Height, f.FPS, f.Precompute, f.Duration, f.Warmup)
		r, err := Latency(ctx, o)
		if err != nil {
			return err
		}
		r.Write(w, f.Record)
		return nil
	}
	fmt.Fprintf(w, "bench soak: models %s, demo scenario at %g fps for %v after %v warm-up\n", f.Models, f.FPS, f.Duration, f.Warmup)
	o.Progress = func(s SoakSample) { s.Write(w) }
	r, err := Soak(ctx, o, f.Interval)
	if err != nil {
		return err
	}
	r.Write(w)
	if 100*r.Growth > f.MaxGrowth {
		return fmt.Errorf("soak: RSS grew %.2f%%, above %g%%", 100*r.Growth, f.MaxGrowth)
	}
	return nil
}

// ScenarioFlags are the flags of `didoedge bench scenario`.
type ScenarioFlags struct {
	Out, Models, Kinds, Mosquitto string
	FPS                           float64
	Reps, Precompute              int
	Lead, OOD, Gap, Clear         time.Duration
	Timing                        alerts.Timing
	Tune, Replay, Reanalyze       bool
}

// AddFlags declares the flags on fs.
func (f *ScenarioFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Out, "out", "", "output directory (report.md, report.json, timeline.png, messages.jsonl, frames.jsonl)")
	fs.StringVar(&f.Models, "models", "models", "reference models directory")
	fs.Float64Var(&f.FPS, "fps", 15, "simulated camera frame rate")
	fs.StringVar(&f.Kinds, "kinds", strings.Join(DefaultKinds, ","), "out-of-distribution segment kinds, in order: fog, noise, night, indoor, obstacle, newcam")
	fs.IntVar(&f.Reps, "reps", 2, "rounds over the kinds")
	fs.DurationVar(&f.Lead, "lead", 20*time.Second, "clear driving before the first segment")
	fs.DurationVar(&f.OOD, "ood", 10*time.Second, "length of each out-of-distribution segment")
	fs.DurationVar(&f.Gap, "gap", 15*time.Second, "clear driving after each out-of-distribution segment")
	fs.DurationVar(&f.Clear, "clear", 10*time.Minute, "clear driving at the end (false episodes)")
	dt, t := alerts.DefaultTiming(), &f.Timing
	fs.DurationVar(&t.FusionTimeConstant, "fusion", dt.FusionTimeConstant, "events.fusion_time_constant")
	fs.DurationVar(&t.EnterInertia, "enter-inertia", dt.EnterInertia, "events.enter_inertia")
	fs.DurationVar(&t.CriticalEnterInertia, "critical-enter-inertia", dt.CriticalEnterInertia, "events.critical_enter_inertia")
	fs.DurationVar(&t.ExitInertia, "exit-inertia", dt.ExitInertia, "events.exit_inertia")
	fs.DurationVar(&t.MinEpisode, "min-episode", dt.MinEpisode, "events.min_episode")
	fs.DurationVar(&t.MergeWindow, "merge-window", dt.MergeWindow, "events.merge_window")
	fs.BoolVar(&f.Tune, "tune", true, "also replay the recorded zone metrics with a grid of timings (tuning table)")
	fs.IntVar(&f.Precompute, "precompute", 0, "pre-render this many frames per segment and loop them (0: render every frame live)")
	fs.StringVar(&f.Mosquitto, "mosquitto", "", "mosquitto binary (default: PATH, then /usr/sbin)")
	fs.BoolVar(&f.Replay, "replay", false, "do not drive: replay the frames recorded in --out with the tuning grid (writes tuning.md)")
	fs.BoolVar(&f.Reanalyze, "reanalyze", false, "do not drive: rebuild --out's report from its recordings (report.md, report.json, timeline.png)")
}

// Run drives the scripted scenario (or, with --replay or --reanalyze,
// works on --out's recordings) and writes the report to w.
func (f *ScenarioFlags) Run(ctx context.Context, w io.Writer, log *slog.Logger) error {
	if f.Out == "" {
		return errors.New("--out DIR is required")
	}
	if f.Reanalyze {
		return ReanalyzeScenarioDir(f.Out, f.Models, w)
	}
	if f.Replay {
		return ReplayScenarioDir(f.Out, f.Models, w)
	}
	if err := demo.CheckLibrary(); err != nil {
		return err
	}
	ref, err := demo.ReadReference(f.Models)
	if err != nil {
		return err
	}
	script, err := Script(strings.Split(f.Kinds, ","), f.Reps, f.Lead, f.OOD, f.Gap, f.Clear)
	if err != nil {
		return fmt.Errorf("--kinds: %w", err)
	}
	tm := f.Timing
	if err := tm.Validate(""); err != nil {
		return err
	}
	spec := ref.Depth
	o := ScenarioOptions{Options: Options{ModelsDir: f.Models, Width: spec.Input.Width, Height: spec.Input.Height,
		FPS: f.FPS, Log: log, Precompute: f.Precompute}, Out: f.Out, Script: script, Timing: &tm, Mosquitto: f.Mosquitto,
		Progress: func(line string) { fmt.Fprintln(w, line) }}
	if f.Tune {
		o.Tune = TuningGrid()
	}
	var total time.Duration
	for _, s := range script {
		total += s.Phase.Duration
	}
	fmt.Fprintf(w, "bench scenario: models %s, camera %dx%d at %g fps over RTSP, mosquitto, %d segments over %v; %s\n",
		f.Models, spec.Input.Width, spec.Input.Height, f.FPS, len(script), total, tm)
	r, err := Scenario(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprint(w, r.Markdown())
	fmt.Fprintf(w, "\nwrote %s/report.md, report.json, timeline.png, messages.jsonl, frames.jsonl\n", f.Out)
	return nil
}

// MulticamFlags are the flags of `didoedge bench multicam`.
type MulticamFlags struct {
	Models, Cameras, ThreadPool  string
	Duration, Warmup             time.Duration
	FPS                          float64
	Frames, Slices, BatchSize    int
	DynamicBatch, ThreadSpinning bool
	// Child >= 0 runs one measurement in this process (0: the bound).
	Child     int
	Inference InferenceFlags
}

// AddFlags declares the flags on fs.
func (f *MulticamFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Models, "models", "models", "reference models directory")
	fs.StringVar(&f.Cameras, "cameras", "1,2,4", "camera counts to measure, comma-separated")
	fs.DurationVar(&f.Duration, "duration", 20*time.Second, "measured time per camera count (after the warm-up)")
	fs.DurationVar(&f.Warmup, "warmup", 5*time.Second, "discarded start of each run")
	fs.Float64Var(&f.FPS, "fps", 0, "each simulated camera's frame rate; 0: free-running cameras (a frame is captured whenever the pipeline asks, so the pipeline alone sets the pace)")
	fs.IntVar(&f.Frames, "frames", 8, "frames each camera pre-renders and loops")
	fs.IntVar(&f.Slices, "slices", 5, "alternations of pipeline and bound within each run")
	fs.BoolVar(&f.DynamicBatch, "dynamic-batch", false, "run copies of the models with a dynamic batch dimension (didoedge model batch: same weights), so that cameras batch")
	fs.IntVar(&f.BatchSize, "batch-size", 0, "pipeline.batch_size of the runs (0: the default: min(cameras, 4) for dynamic-batch models on a GPU provider, else 1)")
	fs.StringVar(&f.ThreadPool, "thread-pool", "", "inference thread_pool of the runs: global or session (empty: the runtime's default, global)")
	fs.BoolVar(&f.ThreadSpinning, "thread-spinning", false, "inference thread_spinning of the runs (ONNX Runtime's own default is a spinning pool per session)")
	fs.IntVar(&f.Child, "child", -1, "internal: run one measurement in this process (0: the bound) and print it as JSON")
	f.Inference.AddFlags(fs)
}

// MulticamRun is the run the flags describe, without its Exec
// (ChildCommand).
func (f *MulticamFlags) MulticamRun(log *slog.Logger) (MulticamRun, error) {
	inf, err := f.Inference.Config()
	if err != nil {
		return MulticamRun{}, err
	}
	if err := (onnxrt.Config{ThreadPool: f.ThreadPool}).Validate(); err != nil {
		return MulticamRun{}, fmt.Errorf("--thread-pool: %w", err)
	}
	var counts []int
	for _, s := range strings.Split(f.Cameras, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > simrig.MaxCameras {
			return MulticamRun{}, fmt.Errorf("--cameras %q: %q is not a camera count in 1..%d", f.Cameras, s, simrig.MaxCameras)
		}
		counts = append(counts, n)
	}
	if err := demo.CheckLibrary(); err != nil {
		return MulticamRun{}, err
	}
	if _, err := demo.ReadReference(f.Models); err != nil {
		return MulticamRun{}, err
	}
	if f.Slices < 1 || f.Slices > 100 {
		return MulticamRun{}, fmt.Errorf("--slices %d: want 1..100", f.Slices)
	}
	o := MulticamOptions{ModelsDir: f.Models, Duration: f.Duration, Warmup: f.Warmup, FPS: f.FPS, Frames: f.Frames, Slices: f.Slices,
		BatchSize: f.BatchSize, DynamicBatch: f.DynamicBatch, ThreadPool: f.ThreadPool, ThreadSpinning: f.ThreadSpinning, Inference: inf, Log: log}
	return MulticamRun{Options: o, Counts: counts,
		Header: MulticamHeader(f.Models, f.FPS, f.Duration, f.Warmup, f.ThreadPool, f.ThreadSpinning)}, nil
}

// ChildCommand is MulticamRun.Exec: the binary self run as `bench
// multicam` with these flags and --child n.
func (f *MulticamFlags) ChildCommand(self string) func(ctx context.Context, n int) *exec.Cmd {
	return func(ctx context.Context, n int) *exec.Cmd {
		return exec.CommandContext(ctx, self, "bench", "multicam", "--models", f.Models, "--cameras", f.Cameras,
			"--duration", f.Duration.String(), "--warmup", f.Warmup.String(), "--fps", strconv.FormatFloat(f.FPS, 'g', -1, 64),
			"--frames", strconv.Itoa(f.Frames), "--slices", strconv.Itoa(f.Slices), "--batch-size", strconv.Itoa(f.BatchSize),
			"--dynamic-batch="+strconv.FormatBool(f.DynamicBatch), "--thread-pool", f.ThreadPool,
			"--thread-spinning="+strconv.FormatBool(f.ThreadSpinning), "--providers", f.Inference.Providers, "--library", f.Inference.Library,
			"--device-tensors", f.Inference.DeviceTensors, "--child", strconv.Itoa(n))
	}
}

// ChaosFlags are the flags of `didoedge bench chaos`.
type ChaosFlags struct {
	// Options holds the flags that are ChaosOptions' fields as they are.
	Options ChaosOptions
	Brokers string
}

// AddFlags declares the flags on fs.
func (f *ChaosFlags) AddFlags(fs *flag.FlagSet) {
	o := &f.Options
	fs.StringVar(&o.Out, "out", "", "output directory (report.json, report.md, per-broker logs and records)")
	fs.StringVar(&o.ModelsDir, "models", "models", "reference models directory")
	fs.DurationVar(&o.Duration, "duration", 10*time.Minute, "total time, split evenly between the brokers")
	fs.StringVar(&f.Brokers, "brokers", "mosquitto,embedded", "brokers in turn: mosquitto, embedded")
	fs.DurationVar(&o.FaultEvery, "fault-every", 20*time.Second, "one fault every this long")
	fs.DurationVar(&o.Warmup, "warmup", time.Minute, "left out of the RSS and goroutine windows at each broker's start")
	fs.DurationVar(&o.RestartWarmup, "restart-warmup", 30*time.Second, "left out of the RSS and goroutine windows after each runtime (re)start")
	fs.DurationVar(&o.Window, "window", 0, "RSS and goroutine comparison window (0: 10 min when a broker's run has 20 min after the warm-up, else a sixth of it)")
	fs.DurationVar(&o.Sample, "sample", 5*time.Second, "RSS and goroutine sampling period")
	fs.IntVar(&o.Cameras, "cameras", 2, "simulated cameras")
	fs.Float64Var(&o.FPS, "fps", 5, "camera frame rate")
	fs.Int64Var(&o.Seed, "seed", 1, "fault script seed")
	fs.IntVar(&o.Subscribers, "subscribers", 2, "persistent subscribers")
}

// Run runs the chaos test with self (this binary) as the runtime, prints
// the report to w (also the progress) and fails when the goal is not met.
func (f *ChaosFlags) Run(ctx context.Context, self string, w io.Writer, log *slog.Logger) error {
	if f.Options.Out == "" {
		return errors.New("bench chaos: --out required")
	}
	if err := demo.CheckLibrary(); err != nil {
		return err
	}
	o := f.Options
	o.Self, o.Brokers, o.Log, o.Progress = self, strings.Split(f.Brokers, ","), log, w
	rep, err := Chaos(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprint(w, rep.Markdown())
	if !rep.Pass {
		return errors.New("bench chaos: goal not met (see report.md)")
	}
	return nil
}
