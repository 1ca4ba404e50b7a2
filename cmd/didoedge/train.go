package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/auxue/depthnet"
	"github.com/didoedge/didoedge/offline"
	"github.com/didoedge/didoedge/runtime/infer"
)

// runTrain dispatches `didoedge train depth|auxue`.
func runTrain(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("want a subcommand: depth (the reference depth network) or auxue (the AuxUE on a frozen depth model)")
	}
	switch args[0] {
	case "depth":
		return runTrainDepth(ctx, env, args[1:])
	case "auxue":
		return runTrainAuxUE(ctx, env, args[1:])
	}
	return fmt.Errorf("unknown subcommand %q (want depth or auxue)", args[0])
}

// runTrainDepth trains auxue/depthnet on the simulated outdoor world and
// exports it with its IO spec.
func runTrainDepth(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "train depth")
	out := fs.String("out", "models", "directory for depth.onnx and depth.yaml")
	ckpt := fs.String("checkpoint", "out/depth.ckpt", "checkpoint file written at the end")
	summary := fs.String("summary", "out/depth-train.json", "JSON summary of the run")
	seed := fs.Int64("seed", 1, "seed of the data order, crops and the weights")
	steps := fs.Int("steps", 1500, "optimizer steps")
	batch := fs.Int("batch", 4, "crops per step")
	crop := fs.Int("crop", 256, "crop width (multiple of 16; crops keep the full 192 rows)")
	drives := fs.Int("drives", 48, "training drives (distinct worlds)")
	frames := fs.Int("frames-per-drive", 200, "frame indices per drive")
	lr := fs.Float64("lr", 1e-3, "initial learning rate (poly decay 0.9 to 1e-5)")
	width := fs.Int("width-mult", 1, "channel multiplier of the network")
	fromCkpt := fs.String("from-checkpoint", "", "skip training: load this checkpoint and only export")
	untrained := fs.Bool("untrained", false, "skip training: export the network with its seeded initial weights (deterministic; a size and speed stand-in, its depth means nothing), e.g. the large GPU benchmark model: --untrained --height 384 --export-width 1280 --width-mult 3")
	height := fs.Int("height", 192, "image rows of the network (multiple of 16; training renders 192-row frames, so only with --untrained or a checkpoint of that height)")
	exportWidth := fs.Int("export-width", 640, "input width of the exported model (multiple of 16)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := offline.TrainConfig{Seed: *seed, Steps: *steps, Batch: *batch, CropWidth: *crop,
		Drives: *drives, FramesPerDrive: *frames, LR: *lr, Log: env.log}
	cfg.Net = depthnet.DefaultConfig()
	cfg.Net.Seed, cfg.Net.Width, cfg.Net.Height = uint64(*seed), *width, *height
	if *height != 192 && !*untrained && *fromCkpt == "" {
		return fmt.Errorf("--height %d: training renders 192-row frames; use --untrained (or --from-checkpoint of a %d-row network)", *height, *height)
	}
	sum, err := offline.DepthRun{Train: cfg, Out: *out, Checkpoint: *ckpt, FromCheckpoint: *fromCkpt, Untrained: *untrained,
		ExportWidth: *exportWidth, Args: args}.Run(ctx)
	if err != nil {
		return err
	}
	return writeSummary(env, *summary, sum)
}

// writeSummary writes a run's summary to path and prints it.
func writeSummary(env *cliEnv, path string, v any) error {
	if err := offline.WriteJSON(path, v); err != nil {
		return err
	}
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runTrainAuxUE trains the generalized AuxUE on the errors of a frozen depth
// model run through ONNX Runtime, on the simulated pool or a data set on
// disk, and exports it with its input contract.
func runTrainAuxUE(ctx context.Context, env *cliEnv, args []string) error {
	run, summary, err := parseTrainAuxUE(env, args)
	if err != nil {
		return err
	}
	sum, err := run.Run(ctx)
	if err != nil {
		return err
	}
	return writeSummary(env, summary, sum)
}

// parseTrainAuxUE parses `train auxue`'s flags; their defaults are the
// recipe of offline.DefaultAuxTrainConfig.
func parseTrainAuxUE(env *cliEnv, args []string) (offline.AuxRun, string, error) {
	d := offline.DefaultAuxTrainConfig()
	fs := newFlagSet(env, "train auxue")
	depthModel := fs.String("depth", "models/depth.onnx", "frozen depth model (any ONNX depth model with an IO spec)")
	depthSpec := fs.String("depth-spec", "", "IO spec YAML of the depth model (default: the model path with .yaml)")
	data := fs.String("data", "", "data set directory (sim render layout, real KITTI with split files, NYU); default: the simulated pool rendered on the fly")
	layout := fs.String("layout", "auto", "layout of --data: auto, sim, kitti, nyu")
	kittiDepth := fs.String("kitti-depth", "", "KITTI: root of the annotated depth (default: --data)")
	split := fs.String("split", d.Split, "training split of --data: a name (train, val, test, all) or a split file")
	valSplit := fs.String("val-split", d.ValSplit, "validation split of --data (none: no validation)")
	out := fs.String("out", "models", "directory for the AuxUE and its IO spec")
	name := fs.String("name", "auxue", "file name (without extension) of the AuxUE and its spec")
	ckpt := fs.String("checkpoint", "out/auxue.ckpt", "checkpoint written after every epoch (weights, optimizer, epoch)")
	resume := fs.Bool("resume", false, "continue from --checkpoint when it exists (same data, seed and epochs)")
	cacheDir := fs.String("cache-dir", "out/cache", "on-disk cache of the depth model's outputs and errors (\"\" = temporary)")
	summary := fs.String("summary", "out/auxue-train.json", "JSON summary of the run")
	library := fs.String("library", "", "ONNX Runtime library (default: $ONNXRUNTIME_LIB, then third_party/)")
	providers := fs.String("providers", "cpu", "execution providers of the depth model, in order: tensorrt, cuda, cpu")
	progress := fs.Bool("progress", true, "draw a progress bar with ETA on stderr")
	seed := fs.Int64("seed", d.Seed, "seed of the frame pool (use the depth run's), the order and the weights")
	drives := fs.Int("drives", d.Drives, "simulated pool: training drives (as for train depth)")
	framesPer := fs.Int("frames-per-drive", d.FramesPerDrive, "simulated pool: frame indices per drive (as for train depth)")
	width := fs.Int("width", d.Width, "simulated pool: rendered frame width")
	height := fs.Int("height", d.Height, "simulated pool: rendered frame height")
	frames := fs.Int("frames", 0, "frames drawn from the pool (default 300), or at most this many of --split (0: all)")
	valFrames := fs.Int("val-frames", 0, "validation frames (pool default 16; --data: at most this many of --val-split, 0: all)")
	epochs := fs.Int("epochs", d.Epochs, fmt.Sprintf("epochs over the cached frames; 0: as many as make about --steps optimizer steps (ceil(steps / (frames/batch)), %d to %d)", offline.MinAutoEpochs, offline.MaxAutoEpochs))
	steps := fs.Int("steps", d.Steps, "with --epochs 0: the optimizer steps that the epochs aim at")
	batch := fs.Int("batch", d.Batch, "frames per step")
	lr := fs.Float64("lr", d.LR, "initial learning rate (poly decay 0.9 to 1e-5)")
	factor := fs.Int("factor", d.Factor, "the AuxUE's block size in input pixels (its grid is 1/factor of the input)")
	noRow := fs.Bool("no-row", d.NoRow, "leave the row coordinate out of the AuxUE's input")
	maxDepth := fs.Float64("max-depth", d.MaxDepth, "metric depth cap: the depth channel is min(d, cap)/cap")
	encW := fs.Int("encoder-width", d.EncoderWidth, "channels of each AuxUE encoder")
	hidden := fs.Int("hidden", d.Hidden, "hidden channels of the DIDO head")
	k := fs.Int("k", d.K, "DIDO bins")
	lambda := fs.Float64("lambda", d.Lambda, "DIDO KL weight")
	globalCtx := fs.Bool("global-context", d.GlobalContext, "join each pixel's DIDO features with the frame's channel means (--global-context=false: local features only)")
	unlabeledKL := fs.Float64("unlabeled-kl", d.UnlabeledKL, "weight gamma of the DIDO KL on blocks without ground truth (0: labeled blocks only, strict eq. 4)")
	gcBands := fs.Int("global-context-bands", d.GlobalContextBands, "with --global-context: horizontal bands whose channel means are joined (0 or 1: the whole frame)")
	outliers := fs.Float64("outliers", d.Outliers, "fraction of batch items replaced by a layout outlier without ground truth (0: none)")
	outlierKinds := fs.String("outlier-kinds", outlierKindsString(d.OutlierKinds), "layout outliers to draw from: flip, tiles")
	modelFeatures := fs.String("model-features", d.ModelFeatures, "a tensor of the depth model that the AuxUE also reads: auto (the last one the graph computes at the finest resolution from 1/4 to 1/8 of the input, with 8 channels or more; none: image and depth only), off, or a tensor name")
	featChannels := fs.Int("model-feature-channels", d.ModelFeatureChannels, "the most channels the AuxUE makes of the depth model's tensor (a seeded random projection when it has more)")
	if err := parseFlags(fs, args); err != nil {
		return offline.AuxRun{}, "", err
	}
	kinds, err := auxue.ParseOutlierKinds(*outlierKinds)
	if err != nil {
		return offline.AuxRun{}, "", fmt.Errorf("flag -outlier-kinds: %w", err)
	}
	inf, err := providerConfig(*providers, *library)
	if err != nil {
		return offline.AuxRun{}, "", fmt.Errorf("flag -providers: %w", err)
	}
	if *depthSpec == "" {
		*depthSpec = strings.TrimSuffix(*depthModel, filepath.Ext(*depthModel)) + ".yaml"
	}
	cfg := offline.AuxTrainConfig{DepthModel: *depthModel, DepthSpec: *depthSpec, Inference: inf,
		Data: *data, Layout: *layout, KITTIDepth: *kittiDepth, Split: *split, ValSplit: *valSplit,
		MaxDepth: *maxDepth, Seed: *seed, Drives: *drives, FramesPerDrive: *framesPer, Width: *width, Height: *height,
		Frames: *frames, ValFrames: *valFrames, Factor: *factor, NoRow: *noRow, Epochs: *epochs, Steps: *steps,
		Batch: *batch, LR: *lr, EncoderWidth: *encW, Hidden: *hidden, K: *k, Lambda: *lambda, UnlabeledKL: *unlabeledKL,
		GlobalContext: *globalCtx, GlobalContextBands: *gcBands, Outliers: *outliers, OutlierKinds: kinds,
		ModelFeatures: *modelFeatures, ModelFeatureChannels: *featChannels, CacheDir: *cacheDir, Checkpoint: *ckpt, Resume: *resume, Log: env.log}
	if err := cfg.CheckRecipe(); err != nil {
		return offline.AuxRun{}, "", err
	}
	if *progress {
		cfg.Progress = env.stderr
	}
	return offline.AuxRun{Train: cfg, Out: *out, Name: *name, Args: args}, *summary, nil
}

func outlierKindsString(kinds []auxue.OutlierKind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

// providerConfig parses a --providers list ("cuda,cpu"; a name followed
// by ":required" is marked required: "cuda:required") and --library.
func providerConfig(list, library string) (infer.Config, error) {
	c := infer.Config{Library: library}
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			name, req := strings.CutSuffix(p, ":required")
			c.Providers = append(c.Providers, infer.ProviderConfig{Name: name, Required: req})
		}
	}
	return c, c.Validate()
}
