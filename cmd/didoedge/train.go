package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/auxue/depthnet"
	"github.com/didoedge/didoedge/auxue/nn"
	"github.com/didoedge/didoedge/offline"
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
	auxDecoder := fs.Bool("aux-decoder", false, "append the decoder features to the aux_features output (the AuxUE's input)")
	auxCoord := fs.Bool("aux-coord", true, "append the row coordinate to the aux_features output")
	auxFactor := fs.Int("aux-factor", 4, "downsampling of the aux_features output, the AuxUE's resolution (2, 4 or 8)")
	fromCkpt := fs.String("from-checkpoint", "", "skip training: load this checkpoint and only export")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := offline.TrainConfig{Seed: *seed, Steps: *steps, Batch: *batch, CropWidth: *crop,
		Drives: *drives, FramesPerDrive: *frames, LR: *lr, Log: env.log}
	cfg.Net = depthnet.DefaultConfig()
	cfg.Net.Seed, cfg.Net.Width = uint64(*seed), *width
	start := time.Now()
	var net *depthnet.Net
	var st offline.TrainStats
	var err error
	if *fromCkpt != "" {
		if net, err = depthnet.New(cfg.Net); err != nil {
			return err
		}
		if _, err := nn.LoadCheckpointFile(*fromCkpt, net.Params()); err != nil {
			return err
		}
		st.Steps, st.DistinctFrames = *steps, *drives**frames
		if st.ValAbsRel, err = offline.Validate(net, cfg); err != nil {
			return err
		}
	} else {
		if net, st, err = offline.Train(ctx, cfg); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(*ckpt), 0o755); err != nil {
			return fmt.Errorf("create checkpoint directory: %w", err)
		}
		if err := nn.SaveCheckpointFile(*ckpt, net.Params(), map[string]string{
			"seed": fmt.Sprint(*seed), "steps": fmt.Sprint(*steps), "width_mult": fmt.Sprint(*width)}); err != nil {
			return err
		}
	}
	model, spec, err := net.WriteArtifacts(*out, "depth", 640, depthnet.AuxOptions{Decoder: *auxDecoder, Coord: *auxCoord, Factor: *auxFactor})
	if err != nil {
		return err
	}
	res := map[string]any{
		"model": model, "spec": spec, "checkpoint": *ckpt, "seed": *seed, "steps": st.Steps,
		"distinct_frames": st.DistinctFrames, "first_loss": st.FirstLoss, "last_loss": st.LastLoss,
		"val_absrel": st.ValAbsRel, "wall_s": time.Since(start).Seconds(), "args": args,
	}
	if err := writeJSONFile(*summary, res); err != nil {
		return err
	}
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

func writeJSONFile(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %q: %w", filepath.Dir(path), err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// runTrainAuxUE trains the generalized AuxUE on the errors of a frozen depth
// model run through ONNX Runtime, and exports it.
func runTrainAuxUE(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "train auxue")
	depthModel := fs.String("depth", "models/depth.onnx", "frozen depth model")
	depthSpec := fs.String("depth-spec", "", "IO spec YAML of the depth model (default: the model path with .yaml)")
	out := fs.String("out", "models", "directory for auxue.onnx and auxue.yaml")
	ckpt := fs.String("checkpoint", "out/auxue.ckpt", "checkpoint file written at the end")
	summary := fs.String("summary", "out/auxue-train.json", "JSON summary of the run")
	library := fs.String("library", "", "ONNX Runtime library (default: $ONNXRUNTIME_LIB, then third_party/)")
	seed := fs.Int64("seed", 1, "seed of the frame pool (use the depth run's), the order and the weights")
	drives := fs.Int("drives", 48, "training drives (as for train depth)")
	framesPer := fs.Int("frames-per-drive", 200, "frame indices per drive (as for train depth)")
	frames := fs.Int("frames", 300, "frames drawn from the pool and cached")
	epochs := fs.Int("epochs", 15, "epochs over the cached frames")
	batch := fs.Int("batch", 2, "frames per step")
	lr := fs.Float64("lr", 2e-3, "initial learning rate (poly decay 0.9 to 1e-5)")
	encW := fs.Int("encoder-width", 8, "channels of each AuxUE encoder")
	hidden := fs.Int("hidden", 8, "hidden channels of the DIDO head")
	k := fs.Int("k", 32, "DIDO bins")
	lambda := fs.Float64("lambda", 0.01, "DIDO KL weight")
	globalCtx := fs.Bool("global-context", false, "join each pixel's DIDO features with the frame's channel means (false: local features only)")
	unlabeledKL := fs.Float64("unlabeled-kl", 0.1, "weight gamma of the DIDO KL on blocks without ground truth (0: labeled blocks only, strict eq. 4)")
	gcBands := fs.Int("global-context-bands", 0, "with -global-context: horizontal bands whose channel means are joined (0 or 1: the whole frame)")
	outliers := fs.Float64("outliers", 0, "fraction of batch items replaced by a layout outlier without ground truth (0: none)")
	outlierKinds := fs.String("outlier-kinds", "flip,tiles", "layout outliers to draw from: flip, tiles")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	kinds, err := auxue.ParseOutlierKinds(*outlierKinds)
	if err != nil {
		return fmt.Errorf("flag -outlier-kinds: %w", err)
	}
	if *depthSpec == "" {
		*depthSpec = strings.TrimSuffix(*depthModel, filepath.Ext(*depthModel)) + ".yaml"
	}
	cfg := offline.AuxTrainConfig{DepthModel: *depthModel, DepthSpec: *depthSpec, Library: *library,
		Seed: *seed, Drives: *drives, FramesPerDrive: *framesPer, Frames: *frames, Epochs: *epochs,
		Batch: *batch, LR: *lr, EncoderWidth: *encW, Hidden: *hidden, K: *k, Lambda: *lambda, UnlabeledKL: *unlabeledKL, GlobalContext: *globalCtx, GlobalContextBands: *gcBands,
		Outliers: *outliers, OutlierKinds: kinds, Log: env.log}
	start := time.Now()
	model, st, err := offline.AuxTrain(ctx, cfg)
	if err != nil {
		return err
	}
	params := make([]*nn.Param, 0, len(model.Params()))
	for _, p := range model.Params() {
		q := *p.Param
		q.Name = p.Name
		params = append(params, &q)
	}
	if err := os.MkdirAll(filepath.Dir(*ckpt), 0o755); err != nil {
		return fmt.Errorf("create checkpoint directory: %w", err)
	}
	if err := nn.SaveCheckpointFile(*ckpt, params, map[string]string{"seed": fmt.Sprint(*seed)}); err != nil {
		return err
	}
	path, spec, err := depthnet.WriteAuxArtifacts(model, *out, "auxue", 192, 640, st.Factor, filepath.Base(*depthModel))
	if err != nil {
		return err
	}
	res := map[string]any{
		"model": path, "spec": spec, "checkpoint": *ckpt, "seed": *seed, "frames": st.Frames, "steps": st.Steps,
		"first_loss": st.FirstLoss, "last_loss": st.LastLoss, "first_laplace": st.FirstAlea, "last_laplace": st.LastAlea,
		"first_dido": st.FirstEpis, "last_dido": st.LastEpis, "depth_train_absrel": st.MeanTrainAbsRel,
		"cache_s": st.CacheTime.Seconds(), "train_s": st.TrainTime.Seconds(), "wall_s": time.Since(start).Seconds(), "args": args,
	}
	if err := writeJSONFile(*summary, res); err != nil {
		return err
	}
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
