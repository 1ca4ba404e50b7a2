package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/didoedge/didoedge/auxue/onnx"
	"github.com/didoedge/didoedge/camera/intrinsics"
	"github.com/didoedge/didoedge/cross/smoke"
	"github.com/didoedge/didoedge/offline"
	"github.com/didoedge/didoedge/runtime/infer"
)

const modelUsage = `usage:
  didoedge model inspect FILE [--probe [--spec FILE] [--image FILE | --seed N] [--size HxW] [--intrinsics fx,fy,cx,cy[,w,h] | --intrinsics-file FILE]]
  didoedge model expose FILE --tensor NAME --out FILE2
  didoedge model batch FILE --out FILE2
  didoedge model export-test --out DIR [--height 64 --width 192 --seed 1]
  didoedge model run --images DIR|GLOB --depth FILE --auxue FILE --out DIR [--depth-spec FILE --auxue-spec FILE --intrinsics fx,fy,cx,cy[,w,h] | --intrinsics-file FILE --providers cpu --config FILE --library FILE]
  didoedge model run --depth FILE --auxue FILE --out DIR [--frames 3 --seed 1 --height 64 --width 192 --depth-spec FILE --config FILE --library FILE]
  didoedge model compare DIR1 DIR2 [--tol 1e-3]`

// runModel dispatches `didoedge model inspect|expose|batch|export-test|run|compare`.
func runModel(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, modelUsage)
		return errors.New("missing subcommand (inspect, expose, batch, export-test, run or compare)")
	}
	switch args[0] {
	case "inspect":
		return runModelInspect(ctx, env, args[1:])
	case "expose":
		return runModelExpose(env, args[1:])
	case "batch":
		return runModelBatch(env, args[1:])
	case "export-test":
		return runModelExportTest(env, args[1:])
	case "run":
		return runModelRun(ctx, env, args[1:])
	case "compare":
		return runModelCompare(env, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(env.stderr, modelUsage)
		return flag.ErrHelp
	}
	fmt.Fprintln(env.stderr, modelUsage)
	return fmt.Errorf("unknown subcommand %q (want inspect, expose, batch, export-test, run or compare)", args[0])
}

func runModelInspect(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "model inspect")
	probe := fs.Bool("probe", false, "run the depth model on a frame and describe its output (range, sign, resolution, bottom-to-top trend), propose the spec lines and check --spec against them")
	spec := fs.String("spec", "", "with --probe: the model's IO spec to check (default: guess the input, read the finest output raw)")
	image := fs.String("image", "", "with --probe: run on this PNG/JPEG (default: a simulated road frame whose depth is known)")
	seed := fs.Int64("seed", 1, "with --probe: seed of the simulated frame")
	size := fs.String("size", "", "with --probe and no --spec: HxW of an input with dynamic sides (default 192x640)")
	providers := fs.String("providers", "cpu", "with --probe: execution providers in order")
	intr := fs.String("intrinsics", "", "with --probe: the camera's fx,fy,cx,cy[,width,height] (a canonical_focal model's metres)")
	intrFile := fs.String("intrinsics-file", "", "with --probe: the camera's intrinsics from a KITTI calibration or a ROS CameraInfo YAML")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("inspect: want one model file, got %d arguments", len(pos))
	}
	s, err := onnx.Inspect(pos[0])
	if err != nil {
		return err
	}
	if err := s.Write(env.stdout); err != nil || !*probe {
		return err
	}
	cfg := offline.ProbeConfig{Model: pos[0], Spec: *spec, Image: *image, SimSeed: *seed, Log: env.log}
	if *size != "" {
		if cfg.Height, cfg.Width, err = parseSize(*size); err != nil {
			return fmt.Errorf("flag -size: %w", err)
		}
	}
	if cfg.Intrinsics, err = intrinsicsFlags(*intr, *intrFile); err != nil {
		return err
	}
	if cfg.Inference, err = providerConfig(*providers, ""); err != nil {
		return fmt.Errorf("flag -providers: %w", err)
	}
	fmt.Fprintln(env.stdout, "\nprobe:")
	rep, err := offline.Probe(ctx, cfg)
	if rep != nil {
		rep.Write(env.stdout)
	}
	return err
}

func runModelExpose(env *cliEnv, args []string) error {
	fs := newFlagSet(env, "model expose")
	tensor := fs.String("tensor", "", "name of the intermediate tensor to add as a graph output")
	out := fs.String("out", "", "path of the edited model")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *tensor == "" || *out == "" {
		fmt.Fprintln(env.stderr, modelUsage)
		return errors.New("expose: want FILE, --tensor NAME and --out FILE2")
	}
	if *out == pos[0] {
		return fmt.Errorf("expose: --out %q would overwrite the input model", *out)
	}
	m, err := onnx.ReadFile(pos[0])
	if err != nil {
		return err
	}
	if err := onnx.Expose(m, *tensor); err != nil {
		return fmt.Errorf("expose %q in %q: %w", *tensor, pos[0], err)
	}
	if err := onnx.WriteFile(*out, m); err != nil {
		return err
	}
	env.log.Info("exposed tensor as graph output", "model", pos[0], "tensor", *tensor, "out", *out)
	return nil
}

// runModelBatch writes a copy of a model whose batch dimension is
// symbolic (onnx.DynamicBatch): same weights, N frames per run.
func runModelBatch(env *cliEnv, args []string) error {
	fs := newFlagSet(env, "model batch")
	out := fs.String("out", "", "path of the edited model")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *out == "" {
		fmt.Fprintln(env.stderr, modelUsage)
		return errors.New("batch: want FILE and --out FILE2")
	}
	if *out == pos[0] {
		return fmt.Errorf("batch: --out %q would overwrite the input model", *out)
	}
	m, err := onnx.ReadFile(pos[0])
	if err != nil {
		return err
	}
	edit, err := onnx.DynamicBatch(m, "")
	if err != nil {
		return fmt.Errorf("model %q: %w", pos[0], err)
	}
	if err := onnx.WriteFile(*out, m); err != nil {
		return err
	}
	env.log.Info("batch dimension made dynamic", "model", pos[0], "out", *out,
		"declarations", edit.Declarations, "broadcast_constants", len(edit.Broadcasts))
	return nil
}

// intrinsicsFlags reads --intrinsics or --intrinsics-file (exclusive);
// nil when neither is given.
func intrinsicsFlags(list, file string) (*intrinsics.Intrinsics, error) {
	switch {
	case list != "" && file != "":
		return nil, errors.New("--intrinsics and --intrinsics-file are exclusive")
	case list != "":
		in, err := intrinsics.ParseList(list)
		if err != nil {
			return nil, fmt.Errorf("flag -intrinsics: %w", err)
		}
		return &in, nil
	case file != "":
		in, err := intrinsics.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("flag -intrinsics-file: %w", err)
		}
		return &in, nil
	}
	return nil, nil
}

// parseInterleaved parses flags that may come before or after positional
// arguments ("expose FILE --tensor X") and returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// runModelExportTest writes the smoke test's networks: seeded random
// weights, clearly named as test networks (not reference models).
func runModelExportTest(env *cliEnv, args []string) error {
	fs := newFlagSet(env, "model export-test")
	out := fs.String("out", "", "directory for "+smoke.TestDepthFile+" and "+smoke.TestAuxUEFile)
	height := fs.Int("height", 64, "input height (divisible by 4)")
	width := fs.Int("width", 192, "input width (divisible by 4)")
	seed := fs.Uint64("seed", 1, "weight seed")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *out == "" {
		fmt.Fprintln(env.stderr, modelUsage)
		return errors.New("export-test: want --out DIR and no positional arguments")
	}
	m, err := smoke.ExportTestModels(*out, smoke.TestModelConfig{Height: *height, Width: *width, Seed: *seed})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "%s  %s\n%s  %s\n", m.DepthSHA256, m.Depth, m.AuxUESHA256, m.AuxUE)
	env.log.Info("exported TEST networks with seeded random weights (not reference models)", "dir", *out, "seed", *seed)
	return nil
}

// runModelRun runs the depth model then the AuxUE on one's own images
// (--images: 16-bit maps, colour panels, summary.json), or on synthetic
// frames (the cross-build smoke test's raw maps and summary.json).
func runModelRun(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "model run")
	images := fs.String("images", "", "run on these images: a directory (its .png, .jpg, .jpeg) or a glob; maps at each image's size")
	auxSpec := fs.String("auxue-spec", "", "with --images: IO spec of the AuxUE (default: its path with .yaml)")
	providers := fs.String("providers", "cpu", "with --images: execution providers in order (tensorrt, cuda, cpu)")
	depth := fs.String("depth", "", "depth model (input image NCHW, output depth)")
	aux := fs.String("auxue", "", "AuxUE model (input features = image + depth, outputs scale, epistemic)")
	out := fs.String("out", "", "output directory for the maps and "+smoke.SummaryFile)
	frames := fs.Int("frames", 3, "number of synthetic frames")
	seed := fs.Uint64("seed", 1, "synthetic frame seed")
	height := fs.Int("height", 64, "frame height (the models' input height)")
	width := fs.Int("width", 192, "frame width (the models' input width)")
	depthSpec := fs.String("depth-spec", "", "IO spec YAML of the depth model (e.g. models/depth.yaml); sets the frame size")
	config := fs.String("config", "", "YAML config whose inference section selects library and providers (default: CPU)")
	library := fs.String("library", "", "ONNX Runtime library (overrides the config's library key)")
	intr := fs.String("intrinsics", "", "with --images: the camera's fx,fy,cx,cy[,width,height] in pixels (of images width x height; scaled to each image)")
	intrFile := fs.String("intrinsics-file", "", "with --images: the camera's intrinsics from a KITTI calibration (P_rect_02, P2) or a ROS CameraInfo YAML (K)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	in, err := intrinsicsFlags(*intr, *intrFile)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *depth == "" || *aux == "" || *out == "" {
		fmt.Fprintln(env.stderr, modelUsage)
		return errors.New("run: want --depth FILE, --auxue FILE and --out DIR")
	}
	var cfg infer.Config
	if *config != "" {
		if cfg, err = smoke.LoadInferenceConfig(*config); err != nil {
			return err
		}
	}
	if *library != "" {
		cfg.Library = *library
	}
	if *images != "" {
		if *config == "" {
			if cfg, err = providerConfig(*providers, cfg.Library); err != nil {
				return fmt.Errorf("flag -providers: %w", err)
			}
		}
		sum, err := offline.RunImages(ctx, offline.ImageRunConfig{Images: *images, Out: *out, Depth: *depth,
			DepthSpec: specBeside(*depth, *depthSpec), AuxUE: *aux, AuxUESpec: specBeside(*aux, *auxSpec), Inference: cfg, Intrinsics: in, Log: env.log})
		if err != nil {
			return err
		}
		sum.Write(env.stdout, *out)
		return nil
	}
	var spec infer.IOSpec
	if *depthSpec != "" {
		data, err := os.ReadFile(*depthSpec)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if spec, err = infer.ParseIOSpec(data, *depthSpec); err != nil {
			return err
		}
		*height, *width = spec.Input.Height, spec.Input.Width
	}
	// The AuxUE's spec: --auxue-spec, or the file beside the model when
	// it exists (the reference models' auxue.yaml).
	var auxIO infer.IOSpec
	if p := specBeside(*aux, *auxSpec); *auxSpec != "" || fileExists(p) {
		if auxIO, err = offline.ReadSpec(p, infer.KindAuxUE); err != nil {
			return err
		}
	}
	sum, err := smoke.Run(ctx, smoke.RunConfig{
		DepthModel: *depth, AuxUEModel: *aux, Height: *height, Width: *width, DepthSpec: spec, AuxUESpec: auxIO,
		Frames: *frames, Seed: *seed, OutDir: *out, Inference: cfg, Log: env.log,
	})
	if err != nil {
		return err
	}
	sum.Write(env.stdout)
	return nil
}

// runModelCompare compares two run directories map by map; it fails when a
// map differs by more than --tol (max abs).
func runModelCompare(env *cliEnv, args []string) error {
	fs := newFlagSet(env, "model compare")
	tol := fs.Float64("tol", 1e-3, "largest allowed absolute difference per value")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fmt.Fprintln(env.stderr, modelUsage)
		return fmt.Errorf("compare: want two run directories, got %d arguments", len(pos))
	}
	c, err := smoke.Compare(pos[0], pos[1], *tol)
	if err != nil {
		return err
	}
	if err := c.Write(env.stdout); err != nil {
		return err
	}
	if !c.OK() {
		return fmt.Errorf("compare %q and %q: maps differ by more than %g", pos[0], pos[1], *tol)
	}
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
