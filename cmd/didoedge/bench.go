package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/auxue/nn/nnbench"
	"github.com/didoedge/didoedge/internal/profiling"
	"github.com/didoedge/didoedge/runtime/apps/bench"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/record"
)

// runBench measures the running system: `bench latency` (frame to MQTT
// subscriber, and its ratio to inference time), `bench soak` (RSS and
// goroutines over a long run), `bench scenario` (alert episodes against
// a scripted drive with ground truth) and the training kernels: `bench
// kernels` (auxue/nn against PyTorch on this CPU).
func runBench(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 && args[0] == "kernels" {
		return runBenchKernels(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "chaos" {
		return runBenchChaos(ctx, env, args[1:])
	}
	if len(args) == 0 || (args[0] != "latency" && args[0] != "soak" && args[0] != "scenario" && args[0] != "multicam") {
		return errors.New("usage: didoedge bench latency|soak|scenario|multicam|chaos|kernels [flags]")
	}
	mode := args[0]
	if mode == "scenario" {
		return runBenchScenario(ctx, env, args[1:])
	}
	if mode == "multicam" {
		return runBenchMulticam(ctx, env, args[1:])
	}
	fs := newFlagSet(env, "bench "+mode)
	models := fs.String("models", "models", "reference models directory")
	fps := fs.Float64("fps", 15, "simulated camera frame rate")
	dflt := time.Minute
	if mode == "soak" {
		dflt = 10 * time.Minute
	}
	duration := fs.Duration("duration", dflt, "measured time (after the warm-up)")
	warmup := fs.Duration("warmup", 10*time.Second, "discarded start")
	interval := fs.Duration("interval", 30*time.Second, "soak: sampling interval")
	maxGrowth := fs.Float64("max-growth", 5, "soak: fail above this RSS growth in percent")
	precompute := fs.Int("precompute", 45, "pre-render this many frames per scene and loop them (0: render live)")
	rec := fs.String("record", "", "latency: record every frame continuously in this frame format (jpeg or png; the record: defaults otherwise) and report the recording's cost")
	recQuality := fs.Int("record-quality", 0, "latency --record jpeg: JPEG quality (default 90)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	providers := fs.String("providers", "", "execution providers in order, e.g. cuda:required or cuda,cpu (\":required\": no fallback); empty: the demo's cpu")
	library := fs.String("library", "", "ONNX Runtime library (default: $ONNXRUNTIME_LIB, then third_party/: the GPU build first when a GPU provider is named)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	inf, err := benchInference(*providers, *library)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := profiling.StartCPU(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := demo.CheckLibrary(); err != nil {
		return err
	}
	ref, err := demo.ReadReference(*models)
	if err != nil {
		return err
	}
	spec := ref.Depth
	o := bench.Options{ModelsDir: *models, Width: spec.Input.Width, Height: spec.Input.Height, FPS: *fps,
		Duration: *duration, Warmup: *warmup, Log: env.log, Precompute: *precompute, Inference: inf}
	if *rec != "" {
		if mode != "latency" {
			return errors.New("--record: bench latency only")
		}
		o.Record = &record.Config{Mode: record.ModeContinuous, FrameFormat: *rec, JPEGQuality: *recQuality}
	}
	w := env.stdout
	if mode == "latency" {
		fmt.Fprintf(w, "bench latency: models %s, camera %dx%d at %g fps over RTSP (%d pre-rendered frames), every frame published; %v after %v warm-up\n",
			*models, spec.Input.Width, spec.Input.Height, *fps, *precompute, *duration, *warmup)
		r, err := bench.Latency(ctx, o)
		if err != nil {
			return err
		}
		r.Write(w, *rec)
		return nil
	}
	fmt.Fprintf(w, "bench soak: models %s, demo scenario at %g fps for %v after %v warm-up\n", *models, *fps, *duration, *warmup)
	o.Progress = func(s bench.SoakSample) { s.Write(w) }
	r, err := bench.Soak(ctx, o, *interval)
	if err != nil {
		return err
	}
	r.Write(w)
	if 100*r.Growth > *maxGrowth {
		return fmt.Errorf("soak: RSS grew %.2f%%, above %g%%", 100*r.Growth, *maxGrowth)
	}
	return nil
}

// runBenchScenario drives the simulated camera through a scripted drive
// with ground-truth segments and reports the alert episodes against it.
func runBenchScenario(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench scenario")
	out := fs.String("out", "", "output directory (report.md, report.json, timeline.png, messages.jsonl, frames.jsonl)")
	models := fs.String("models", "models", "reference models directory")
	fps := fs.Float64("fps", 15, "simulated camera frame rate")
	kinds := fs.String("kinds", strings.Join(bench.DefaultKinds, ","), "out-of-distribution segment kinds, in order: fog, noise, night, indoor, obstacle")
	reps := fs.Int("reps", 2, "rounds over the kinds")
	lead := fs.Duration("lead", 20*time.Second, "clear driving before the first segment")
	ood := fs.Duration("ood", 10*time.Second, "length of each out-of-distribution segment")
	gap := fs.Duration("gap", 15*time.Second, "clear driving after each out-of-distribution segment")
	clear := fs.Duration("clear", 10*time.Minute, "clear driving at the end (false episodes)")
	dt := alerts.DefaultTiming()
	fusion := fs.Duration("fusion", dt.FusionTimeConstant, "events.fusion_time_constant")
	enter := fs.Duration("enter-inertia", dt.EnterInertia, "events.enter_inertia")
	critEnter := fs.Duration("critical-enter-inertia", dt.CriticalEnterInertia, "events.critical_enter_inertia")
	exit := fs.Duration("exit-inertia", dt.ExitInertia, "events.exit_inertia")
	minEp := fs.Duration("min-episode", dt.MinEpisode, "events.min_episode")
	merge := fs.Duration("merge-window", dt.MergeWindow, "events.merge_window")
	tune := fs.Bool("tune", true, "also replay the recorded zone metrics with a grid of timings (tuning table)")
	precompute := fs.Int("precompute", 0, "pre-render this many frames per segment and loop them (0: render every frame live)")
	mosq := fs.String("mosquitto", "", "mosquitto binary (default: PATH, then /usr/sbin)")
	replay := fs.Bool("replay", false, "do not drive: replay the frames recorded in --out with the tuning grid (writes tuning.md)")
	reanalyze := fs.Bool("reanalyze", false, "do not drive: rebuild --out's report from its recordings (report.md, report.json, timeline.png)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("--out DIR is required")
	}
	if *reanalyze {
		return bench.ReanalyzeScenarioDir(*out, *models, env.stdout)
	}
	if *replay {
		return bench.ReplayScenarioDir(*out, *models, env.stdout)
	}
	if err := demo.CheckLibrary(); err != nil {
		return err
	}
	ref, err := demo.ReadReference(*models)
	if err != nil {
		return err
	}
	script, err := bench.Script(strings.Split(*kinds, ","), *reps, *lead, *ood, *gap, *clear)
	if err != nil {
		return fmt.Errorf("--kinds: %w", err)
	}
	tm := alerts.Timing{FusionTimeConstant: *fusion, EnterInertia: *enter, CriticalEnterInertia: *critEnter, ExitInertia: *exit,
		MinEpisode: *minEp, MergeWindow: *merge}
	if err := tm.Validate(""); err != nil {
		return err
	}
	w := env.stdout
	spec := ref.Depth
	o := bench.ScenarioOptions{Options: bench.Options{ModelsDir: *models, Width: spec.Input.Width, Height: spec.Input.Height,
		FPS: *fps, Log: env.log, Precompute: *precompute}, Out: *out, Script: script, Timing: &tm, Mosquitto: *mosq,
		Progress: func(line string) { fmt.Fprintln(w, line) }}
	if *tune {
		o.Tune = bench.TuningGrid()
	}
	var total time.Duration
	for _, s := range script {
		total += s.Phase.Duration
	}
	fmt.Fprintf(w, "bench scenario: models %s, camera %dx%d at %g fps over RTSP, mosquitto, %d segments over %v; %s\n",
		*models, spec.Input.Width, spec.Input.Height, *fps, len(script), total, tm)
	r, err := bench.Scenario(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprint(w, r.Markdown())
	fmt.Fprintf(w, "\nwrote %s/report.md, report.json, timeline.png, messages.jsonl, frames.jsonl\n", *out)
	return nil
}

// runBenchKernels checks and times auxue/nn's layers against PyTorch
// (auxue/nn/nnbench) and prints the table: GFLOP/s of both, their ratio and
// their fractions of the measured FMA peak.
func runBenchKernels(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench kernels")
	threads := fs.String("threads", "1,2", "comma-separated thread counts (GOMAXPROCS and torch.set_num_threads)")
	rounds := fs.Int("rounds", 5, "interleaved Go/PyTorch rounds per case; the table shows medians")
	minTime := fs.Duration("min-time", 300*time.Millisecond, "time per measurement")
	python := fs.String("python", "/usr/bin/python3", "Python interpreter with PyTorch (Debian's python3-torch)")
	only := fs.String("only", "", "run only the cases whose name contains this text")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o := nnbench.Options{Rounds: *rounds, MinTime: *minTime, Python: *python, Log: env.log}
	for _, f := range strings.Split(*threads, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || t < 1 {
			return fmt.Errorf("--threads: %q is not a positive integer", f)
		}
		o.Threads = append(o.Threads, t)
	}
	for _, c := range nnbench.DefaultCases() {
		if strings.Contains(c.Name, *only) {
			o.Cases = append(o.Cases, c)
		}
	}
	if len(o.Cases) == 0 {
		return fmt.Errorf("--only %q matches no case", *only)
	}
	r, err := nnbench.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := r.WriteTable(env.stdout); err != nil {
		return err
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *jsonOut, err)
		}
	}
	return nil
}

// runBenchMulticam measures N cameras in one runtime against the
// single-session bound. Each camera count and the bound run in a child
// process of their own (this binary with --child), so that each RSS is
// that configuration's alone.
func runBenchMulticam(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench multicam")
	models := fs.String("models", "models", "reference models directory")
	camList := fs.String("cameras", "1,2,4", "camera counts to measure, comma-separated")
	duration := fs.Duration("duration", 20*time.Second, "measured time per camera count (after the warm-up)")
	warmup := fs.Duration("warmup", 5*time.Second, "discarded start of each run")
	fps := fs.Float64("fps", 0, "each simulated camera's frame rate; 0: free-running cameras (a frame is captured whenever the pipeline asks, so the pipeline alone sets the pace)")
	frames := fs.Int("frames", 8, "frames each camera pre-renders and loops")
	nSlices := fs.Int("slices", 5, "alternations of pipeline and bound within each run")
	dynamic := fs.Bool("dynamic-batch", false, "run copies of the models with a dynamic batch dimension (didoedge model batch: same weights), so that cameras batch")
	batch := fs.Int("batch-size", 0, "pipeline.batch_size of the runs (0: the default: min(cameras, 4) for dynamic-batch models on a GPU provider, else 1)")
	pool := fs.String("thread-pool", "", "inference thread_pool of the runs: global or session (empty: the runtime's default, global)")
	spinning := fs.Bool("thread-spinning", false, "inference thread_spinning of the runs (ONNX Runtime's own default is a spinning pool per session)")
	child := fs.Int("child", -1, "internal: run one measurement in this process (0: the bound) and print it as JSON")
	providers := fs.String("providers", "", "execution providers in order, e.g. cuda:required or cuda,cpu (\":required\": no fallback); empty: the demo's cpu")
	library := fs.String("library", "", "ONNX Runtime library (default: $ONNXRUNTIME_LIB, then third_party/: the GPU build first when a GPU provider is named)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	inf, err := benchInference(*providers, *library)
	if err != nil {
		return err
	}
	if err := (infer.Config{ThreadPool: *pool}).Validate(); err != nil {
		return fmt.Errorf("--thread-pool: %w", err)
	}
	var counts []int
	for _, f := range strings.Split(*camList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > demo.MaxCameras {
			return fmt.Errorf("--cameras %q: %q is not a camera count in 1..%d", *camList, f, demo.MaxCameras)
		}
		counts = append(counts, n)
	}
	if err := demo.CheckLibrary(); err != nil {
		return err
	}
	if _, err := demo.ReadReference(*models); err != nil {
		return err
	}
	if *nSlices < 1 || *nSlices > 100 {
		return fmt.Errorf("--slices %d: want 1..100", *nSlices)
	}
	o := bench.MulticamOptions{ModelsDir: *models, Duration: *duration, Warmup: *warmup, FPS: *fps, Frames: *frames, Slices: *nSlices, BatchSize: *batch, DynamicBatch: *dynamic,
		ThreadPool: *pool, ThreadSpinning: *spinning, Inference: inf, Log: env.log}
	run := bench.MulticamRun{Options: o, Counts: counts, Header: bench.MulticamHeader(*models, *fps, *duration, *warmup, *pool, *spinning)}
	if *child >= 0 {
		return run.Child(ctx, *child, env.stdout)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	run.Exec = func(ctx context.Context, n int) *exec.Cmd {
		return exec.CommandContext(ctx, self, "bench", "multicam", "--models", *models, "--cameras", *camList,
			"--duration", duration.String(), "--warmup", warmup.String(), "--fps", strconv.FormatFloat(*fps, 'g', -1, 64),
			"--frames", strconv.Itoa(*frames), "--slices", strconv.Itoa(*nSlices), "--batch-size", strconv.Itoa(*batch), "--dynamic-batch="+strconv.FormatBool(*dynamic),
			"--thread-pool", *pool, "--thread-spinning="+strconv.FormatBool(*spinning), "--providers", *providers, "--library", *library,
			"--child", strconv.Itoa(n))
	}
	return run.Run(ctx, env.stdout)
}

// benchInference is the inference override of --providers and --library
// (nil: the demo's CPU provider and library resolution).
func benchInference(providers, library string) (*infer.Config, error) {
	if providers == "" && library == "" {
		return nil, nil
	}
	c, err := providerConfig(providers, library)
	if err != nil {
		return nil, fmt.Errorf("--providers %q: %w", providers, err)
	}
	return &c, nil
}

// runBenchChaos is `didoedge bench chaos`: the runtime in a child process
// against mosquitto and the embedded broker in turn, under a seeded fault
// script, with persistent subscribers (bench.Chaos).
func runBenchChaos(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "bench chaos")
	out := fs.String("out", "", "output directory (report.json, report.md, per-broker logs and records)")
	models := fs.String("models", "models", "reference models directory")
	duration := fs.Duration("duration", 10*time.Minute, "total time, split evenly between the brokers")
	brokers := fs.String("brokers", "mosquitto,embedded", "brokers in turn: mosquitto, embedded")
	every := fs.Duration("fault-every", 20*time.Second, "one fault every this long")
	warmup := fs.Duration("warmup", time.Minute, "left out of the RSS and goroutine windows at each broker's start")
	restartWarmup := fs.Duration("restart-warmup", 30*time.Second, "left out of the RSS and goroutine windows after each runtime (re)start")
	window := fs.Duration("window", 0, "RSS and goroutine comparison window (0: 10 min when a broker's run has 20 min after the warm-up, else a sixth of it)")
	sample := fs.Duration("sample", 5*time.Second, "RSS and goroutine sampling period")
	cams := fs.Int("cameras", 2, "simulated cameras")
	fps := fs.Float64("fps", 5, "camera frame rate")
	seed := fs.Int64("seed", 1, "fault script seed")
	subs := fs.Int("subscribers", 2, "persistent subscribers")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("bench chaos: --out required")
	}
	if err := demo.CheckLibrary(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o := bench.ChaosOptions{ModelsDir: *models, Out: *out, Self: self, Brokers: strings.Split(*brokers, ","), Duration: *duration,
		FaultEvery: *every, Warmup: *warmup, RestartWarmup: *restartWarmup, Window: *window, Sample: *sample, Cameras: *cams, FPS: *fps, Seed: *seed,
		Subscribers: *subs, Log: env.log, Progress: env.stdout}
	rep, err := bench.Chaos(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprint(env.stdout, rep.Markdown())
	if !rep.Pass {
		return errors.New("bench chaos: goal not met (see report.md)")
	}
	return nil
}
