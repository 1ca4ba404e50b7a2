package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/offline"
)

// runEvalQuick evaluates the reference models through ONNX Runtime:
// didoedge eval-quick --data DIR [--indoor DIR] [--models models/] [--json].
func runEvalQuick(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "eval-quick")
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
	res, err := offline.QuickEval(ctx, offline.QuickConfig{Data: *data, Layout: *layout, KITTIDepth: *kittiDepth, Indoor: *indoor,
		Models: *models, DepthModel: *depth, DepthSpec: specBeside(*depth, *depthSpec), AuxUEModel: *aux, AuxUESpec: specBeside(*aux, *auxSpec),
		Inference: inf, Split: *split, MaxFrames: *maxFrames, MaxIndoor: *maxIndoor, Log: env.log})
	if err != nil {
		return err
	}
	return res.Write(env.stdout, *asJSON)
}

// specBeside is spec, or the model's path with .yaml when spec is empty
// and the model given.
func specBeside(model, spec string) string {
	if spec != "" || model == "" {
		return spec
	}
	return strings.TrimSuffix(model, filepath.Ext(model)) + ".yaml"
}
