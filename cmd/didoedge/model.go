package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/didoedge/didoedge/offline"
	"github.com/didoedge/didoedge/offline/modeltool"
	"github.com/didoedge/didoedge/pkg/onnx"
)

const modelUsage = `usage:
  didoedge model inspect FILE [--probe [--spec FILE] [--image FILE | --seed N] [--size HxW] [--intrinsics fx,fy,cx,cy[,w,h] | --intrinsics-file FILE]]
  didoedge model expose FILE --tensor NAME --out FILE2
  didoedge model batch FILE --out FILE2
  didoedge model export-test --out DIR [--height 64 --width 192 --seed 1]
  didoedge model run --images DIR|GLOB --depth FILE --auxue FILE --out DIR [--depth-spec FILE --auxue-spec FILE --intrinsics fx,fy,cx,cy[,w,h] | --intrinsics-file FILE --providers cpu --config FILE --library FILE]
  didoedge model run --depth FILE --auxue FILE --out DIR [--frames 3 --seed 1 --height 64 --width 192 --depth-spec FILE --config FILE --library FILE]
  didoedge model compare DIR1 DIR2 [--tol 1e-3]
  didoedge model domain --test DIR [--set NAME=DIR ...] [--models DIR | --depth F --depth-spec F --auxue F --auxue-spec F] [--data DIR --frames 160 --write mahalanobis|knn]`

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
	case "domain":
		return runModelDomain(ctx, env, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(env.stderr, modelUsage)
		return flag.ErrHelp
	}
	fmt.Fprintln(env.stderr, modelUsage)
	return fmt.Errorf("unknown subcommand %q (want inspect, expose, batch, export-test, run or compare)", args[0])
}

func runModelInspect(ctx context.Context, env *cliEnv, args []string) error {
	var f offline.ProbeFlags
	fs := newFlagSet(env, "model inspect")
	f.AddFlags(fs)
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
	if err := s.Write(env.stdout); err != nil || !f.Probe {
		return err
	}
	cfg, err := f.Config(pos[0], env.log)
	if err != nil {
		return err
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
	var c modeltool.TestModelConfig
	fs := newFlagSet(env, "model export-test")
	out := fs.String("out", "", "directory for "+modeltool.TestDepthFile+" and "+modeltool.TestAuxUEFile)
	c.AddFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *out == "" {
		fmt.Fprintln(env.stderr, modelUsage)
		return errors.New("export-test: want --out DIR and no positional arguments")
	}
	m, err := modeltool.ExportTestModels(*out, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "%s  %s\n%s  %s\n", m.DepthSHA256, m.Depth, m.AuxUESHA256, m.AuxUE)
	env.log.Info("exported TEST networks with seeded random weights (not reference models)", "dir", *out, "seed", c.Seed)
	return nil
}

// runModelRun runs the depth model then the AuxUE on one's own images
// (--images: 16-bit maps, colour panels, summary.json), or on synthetic
// frames (the cross-build smoke test's raw maps and summary.json).
func runModelRun(ctx context.Context, env *cliEnv, args []string) error {
	var f offline.ModelRunFlags
	fs := newFlagSet(env, "model run")
	f.AddFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	in, err := f.Intrinsics.Intrinsics()
	if err != nil {
		return err
	}
	if len(pos) != 0 || f.Depth == "" || f.AuxUE == "" || f.Out == "" {
		fmt.Fprintln(env.stderr, modelUsage)
		return errors.New("run: want --depth FILE, --auxue FILE and --out DIR")
	}
	return f.Run(ctx, in, env.stdout, env.log)
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
	c, err := modeltool.Compare(pos[0], pos[1], *tol)
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

// runModelDomain measures the training-domain statistics (frame-level AUC
// of each --set against in-domain --test frames) and optionally writes
// the record into the AuxUE's spec; it prints the result as JSON.
func runModelDomain(ctx context.Context, env *cliEnv, args []string) error {
	var f offline.DomainFlags
	fs := newFlagSet(env, "model domain")
	f.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("domain: unexpected arguments %q", fs.Args())
	}
	cfg, err := f.Config(env.log)
	if err != nil {
		return err
	}
	res, err := offline.RunDomain(ctx, cfg)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
