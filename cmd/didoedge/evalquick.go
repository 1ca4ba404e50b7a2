package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	iofs "io/fs"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/calib/calibrate"
	"github.com/didoedge/didoedge/internal/shard"
	"github.com/didoedge/didoedge/offline"
)

// runEvalQuick evaluates the reference models through ONNX Runtime:
// didoedge eval-quick --data DIR [--indoor DIR] [--models models/] [--json];
// `eval-quick shard` and `eval-quick merge` split it.
func runEvalQuick(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 && args[0] == "merge" {
		return runEvalQuickMerge(ctx, env, args[1:])
	}
	sharded := len(args) > 0 && args[0] == "shard"
	name := "eval-quick"
	if sharded {
		args, name = args[1:], "eval-quick shard"
	}
	fs := newFlagSet(env, name)
	data := fs.String("data", "", "data set: sim render layout, real KITTI (with --split FILE) or NYU (required)")
	layout := fs.String("layout", "auto", "layout of --data: auto, sim, kitti, nyu")
	kittiDepth := fs.String("kitti-depth", "", "KITTI: root of the annotated depth (default: --data)")
	indoor := fs.String("indoor", "", "second data set whose ground-truth pixels are the positives of the data-set-change AUC")
	models := fs.String("models", "models", "directory with depth.onnx, depth.yaml, auxue.onnx and auxue.yaml")
	depth := fs.String("depth", "", "depth model (overrides --models; any ONNX depth model with an IO spec)")
	depthSpec := fs.String("depth-spec", "", "IO spec of --depth (default: its path with .yaml)")
	aux := fs.String("auxue", "", "AuxUE model (overrides --models)")
	auxSpec := fs.String("auxue-spec", "", "IO spec of --auxue (default: its path with .yaml)")
	providers := fs.String("providers", "cpu", "execution providers, in order: tensorrt, cuda, cpu")
	split := fs.String("split", "all", "split of --data: train, val, test, all, or a split file")
	maxFrames := fs.Int("max-frames", 0, "use at most this many outdoor frames (0 = all)")
	maxIndoor := fs.Int("max-indoor", 0, "use at most this many indoor frames (0 = all)")
	library := fs.String("library", "", "ONNX Runtime library (default: $ONNXRUNTIME_LIB, then third_party/)")
	asJSON := fs.Bool("json", false, "print JSON")
	index := fs.Int("index", -1, "shard: index (default: $"+shard.EnvIndex+", else 0)")
	count := fs.Int("count", 0, "shard: number of shards (default: $"+shard.EnvCount+", else 1)")
	out := fs.String("out", "", "shard: statistics file to write (JSON, a path or s3:// URL); "+calibrate.IndexPlaceholder+" is replaced by the index")
	report := fs.String("report", "", "also write what is printed to this file or s3:// object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *data == "" {
		return fmt.Errorf("--data is required")
	}
	inf, err := providerConfig(*providers, *library)
	if err != nil {
		return fmt.Errorf("flag -providers: %w", err)
	}
	cfg := offline.QuickConfig{Data: *data, Layout: *layout, KITTIDepth: *kittiDepth, Indoor: *indoor,
		Models: *models, DepthModel: *depth, DepthSpec: specBeside(*depth, *depthSpec), AuxUEModel: *aux, AuxUESpec: specBeside(*aux, *auxSpec),
		Inference: inf, Split: *split, MaxFrames: *maxFrames, MaxIndoor: *maxIndoor, Log: env.log}
	for _, f := range []struct {
		flag, loc string
		fsys      *iofs.FS
	}{{"--data", *data, &cfg.DataFS}, {"--indoor", *indoor, &cfg.IndoorFS}, {"--kitti-depth", *kittiDepth, &cfg.KITTIDepthFS}} {
		if f.loc == "" {
			continue
		}
		if *f.fsys, err = env.store().DirFS(ctx, f.loc); err != nil {
			return fmt.Errorf("%s %s: %w", f.flag, f.loc, err)
		}
	}
	if !sharded {
		res, err := offline.QuickEval(ctx, cfg)
		if err != nil {
			return err
		}
		return printReport(ctx, env, *report, func(w io.Writer) error { return res.Write(w, *asJSON) })
	}
	if *out == "" {
		return fmt.Errorf("eval-quick shard: --out FILE is required")
	}
	if err := shard.FromEnv(index, count); err != nil {
		return err
	}
	st, err := offline.QuickShard(ctx, cfg, *index, *count)
	if err != nil {
		return err
	}
	path := calibrate.SummaryPath(*out, *index)
	var buf bytes.Buffer
	if err := st.Write(&buf); err != nil {
		return fmt.Errorf("eval-quick shard %s: %w", path, err)
	}
	if err := env.store().WriteFile(ctx, path, buf.Bytes()); err != nil {
		return fmt.Errorf("eval-quick shard: %w", err)
	}
	fmt.Fprintf(env.stdout, "eval-quick shard %d of %d: %d outdoor and %d indoor frames of %d; wrote %s\n",
		*index, *count, st.Frames, st.Indoor, st.Listing.Frames, path)
	return nil
}

// runEvalQuickMerge prints the merged figures of eval-quick shards.
func runEvalQuickMerge(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "eval-quick merge")
	report := fs.String("report", "", "also write the merged figures (JSON) to this file or s3:// object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("usage: didoedge eval-quick merge [--report FILE] SUMMARY|DIR...")
	}
	files, err := env.store().Expand(ctx, fs.Args(), ".json")
	if err != nil {
		return fmt.Errorf("eval-quick merge: %w", err)
	}
	m, err := offline.QuickMergeFiles(files, func(f string) ([]byte, error) { return env.store().ReadFile(ctx, f) })
	if err != nil {
		return err
	}
	return printReport(ctx, env, *report, m.WriteJSON)
}

// printReport prints what write writes and, when report names a file or
// an s3:// object, writes the same there.
func printReport(ctx context.Context, env *cliEnv, report string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	if report != "" {
		if err := env.store().WriteFile(ctx, report, buf.Bytes()); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	_, err := env.stdout.Write(buf.Bytes())
	return err
}

// specBeside is spec, or the model's path with .yaml when spec is empty
// and the model given.
func specBeside(model, spec string) string {
	if spec != "" || model == "" {
		return spec
	}
	return strings.TrimSuffix(model, filepath.Ext(model)) + ".yaml"
}
