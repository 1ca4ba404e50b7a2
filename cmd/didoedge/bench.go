package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/didoedge/didoedge/auxue/nn/nnbench"
	"github.com/didoedge/didoedge/runtime/bench"
	"github.com/didoedge/didoedge/runtime/demo"
)

// runBench measures the running system: `bench latency` (frame to MQTT
// subscriber, and its ratio to inference time) and `bench soak` (RSS and
// goroutines over a long run), and the training kernels: `bench kernels`
// (auxue/nn against PyTorch on this CPU).
func runBench(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 && args[0] == "kernels" {
		return runBenchKernels(ctx, env, args[1:])
	}
	if len(args) == 0 || (args[0] != "latency" && args[0] != "soak") {
		return errors.New("usage: didoedge bench latency|soak|kernels [flags]")
	}
	mode := args[0]
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
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
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
		Duration: *duration, Warmup: *warmup, Log: env.log, Precompute: *precompute}
	w := env.stdout
	if mode == "latency" {
		fmt.Fprintf(w, "bench latency: models %s, camera %dx%d at %g fps over RTSP (%d pre-rendered frames), every frame published; %v after %v warm-up\n",
			*models, spec.Input.Width, spec.Input.Height, *fps, *precompute, *duration, *warmup)
		r, err := bench.Latency(ctx, o)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "frames measured %d, assessed %.2f fps, dropped %d (latest-frame policy), provider %s\n", r.Frames, r.FPS, r.Dropped, r.Provider)
		fmt.Fprintf(w, "capture -> MQTT subscriber: p50 %v  p99 %v\n", r.LatencyP50.Round(time.Microsecond), r.LatencyP99.Round(time.Microsecond))
		fmt.Fprintf(w, "inference (depth + AuxUE): p50 %v  p99 %v\n", r.InferP50.Round(time.Microsecond), r.InferP99.Round(time.Microsecond))
		fmt.Fprintf(w, "ratio latency/inference (p50): %.3f\n", r.Ratio)
		fmt.Fprintf(w, "runtime path (pipeline takes the frame -> subscriber): p50 %v  p99 %v  ratio to inference (p50) %.3f\n",
			r.RuntimeP50.Round(time.Microsecond), r.RuntimeP99.Round(time.Microsecond), r.RuntimeRatio)
		fmt.Fprintf(w, "means: capture -> pipeline start %v, capture -> events queued %v; stages:", r.CameraMean.Round(time.Microsecond), r.PipelineMean.Round(time.Microsecond))
		for _, st := range []string{"camera", "preprocess", "depth", "auxue", "readout", "alerts"} {
			fmt.Fprintf(w, " %s %v", st, r.Stages[st].Round(time.Microsecond))
		}
		fmt.Fprintln(w)
		return nil
	}
	fmt.Fprintf(w, "bench soak: models %s, demo scenario at %g fps for %v after %v warm-up\n", *models, *fps, *duration, *warmup)
	o.Progress = func(s bench.SoakSample) {
		fmt.Fprintf(w, "%8v  rss %6.1f MiB  goroutines %4d  frames %7d  events %5d\n",
			s.Elapsed.Round(time.Second), float64(s.RSSBytes)/(1<<20), s.Goroutines, s.Frames, s.Events)
	}
	r, err := bench.Soak(ctx, o, *interval)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "rss %0.1f -> %0.1f MiB (max %0.1f): growth %+.2f%%; goroutines %d -> %d; %d frames\n",
		float64(r.BaseRSS)/(1<<20), float64(r.EndRSS)/(1<<20), float64(r.MaxRSS)/(1<<20), 100*r.Growth,
		r.BaseGoroutines, r.EndGoroutines, r.Frames)
	if 100*r.Growth > *maxGrowth {
		return fmt.Errorf("soak: RSS grew %.2f%%, above %g%%", 100*r.Growth, *maxGrowth)
	}
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
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
