package offline

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// DepthFlags are the flags of `didoedge train depth`.
type DepthFlags struct {
	Out, Checkpoint, Summary, FromCheckpoint   string
	Seed                                       int64
	Steps, Batch, Crop, Drives, FramesPerDrive int
	WidthMult, Height, ExportWidth             int
	LR                                         float64
	Untrained                                  bool
}

// AddFlags declares the flags on fs.
func (f *DepthFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Out, "out", "models", "directory for depth.onnx and depth.yaml")
	fs.StringVar(&f.Checkpoint, "checkpoint", "out/depth.ckpt", "checkpoint file written at the end")
	fs.StringVar(&f.Summary, "summary", "out/depth-train.json", "JSON summary of the run")
	fs.Int64Var(&f.Seed, "seed", 1, "seed of the data order, crops and the weights")
	fs.IntVar(&f.Steps, "steps", 1500, "optimizer steps")
	fs.IntVar(&f.Batch, "batch", 4, "crops per step")
	fs.IntVar(&f.Crop, "crop", 256, "crop width (multiple of 16; crops keep the full 192 rows)")
	fs.IntVar(&f.Drives, "drives", 48, "training drives (distinct worlds)")
	fs.IntVar(&f.FramesPerDrive, "frames-per-drive", 200, "frame indices per drive")
	fs.Float64Var(&f.LR, "lr", 1e-3, "initial learning rate (poly decay 0.9 to 1e-5)")
	fs.IntVar(&f.WidthMult, "width-mult", 1, "channel multiplier of the network")
	fs.StringVar(&f.FromCheckpoint, "from-checkpoint", "", "skip training: load this checkpoint and only export")
	fs.BoolVar(&f.Untrained, "untrained", false, "skip training: export the network with its seeded initial weights (deterministic; a size and speed stand-in, its depth means nothing), e.g. the large GPU benchmark model: --untrained --height 384 --export-width 1280 --width-mult 3")
	fs.IntVar(&f.Height, "height", 192, "image rows of the network (multiple of 16; training renders 192-row frames, so only with --untrained or a checkpoint of that height)")
	fs.IntVar(&f.ExportWidth, "export-width", 640, "input width of the exported model (multiple of 16)")
}

// DepthRun is the run the flags describe; args (the command's arguments)
// are kept in its summary.
func (f *DepthFlags) DepthRun(args []string, log *slog.Logger) (DepthRun, error) {
	if f.Height != 192 && !f.Untrained && f.FromCheckpoint == "" {
		return DepthRun{}, fmt.Errorf("--height %d: training renders 192-row frames; use --untrained (or --from-checkpoint of a %d-row network)", f.Height, f.Height)
	}
	cfg := depthtrain.TrainConfig{Seed: f.Seed, Steps: f.Steps, Batch: f.Batch, CropWidth: f.Crop,
		Drives: f.Drives, FramesPerDrive: f.FramesPerDrive, LR: f.LR, Log: log}
	cfg.Net = depthnet.DefaultConfig()
	cfg.Net.Seed, cfg.Net.Width, cfg.Net.Height = uint64(f.Seed), f.WidthMult, f.Height
	return DepthRun{Train: cfg, Out: f.Out, Checkpoint: f.Checkpoint, FromCheckpoint: f.FromCheckpoint, Untrained: f.Untrained,
		ExportWidth: f.ExportWidth, Args: args}, nil
}

// AuxFlags are the flags of `didoedge train auxue`; their defaults are the
// recipe of DefaultAuxTrainConfig.
type AuxFlags struct {
	// Train holds the flags that are AuxTrainConfig's fields as they are.
	Train                                  AuxTrainConfig
	Out, Name, Summary, Library, Providers string
	OutlierKinds                           string
	Progress                               bool
}

// AddFlags declares the flags on fs.
func (f *AuxFlags) AddFlags(fs *flag.FlagSet) {
	d, c := DefaultAuxTrainConfig(), &f.Train
	fs.StringVar(&c.DepthModel, "depth", "models/depth.onnx", "frozen depth model (any ONNX depth model with an IO spec)")
	fs.StringVar(&c.DepthSpec, "depth-spec", "", "IO spec YAML of the depth model (default: the model path with .yaml)")
	fs.StringVar(&c.Data, "data", "", "data set directory or s3:// prefix (sim render layout, real KITTI with split files, NYU), or a recording FILE.mcap (exported once into --cache-dir, every frame in the train split, no validation); default: the simulated pool rendered on the fly")
	fs.StringVar(&c.Layout, "layout", "auto", "layout of --data: auto, sim, kitti, nyu")
	fs.StringVar(&c.KITTIDepth, "kitti-depth", "", "KITTI: root of the annotated depth, a directory or s3:// prefix (default: --data)")
	fs.StringVar(&c.Split, "split", d.Split, "training split of --data: a name (train, val, test, all) or a split file")
	fs.StringVar(&c.ValSplit, "val-split", d.ValSplit, "validation split of --data (none: no validation)")
	fs.StringVar(&f.Out, "out", "models", "directory for the AuxUE and its IO spec")
	fs.StringVar(&f.Name, "name", "auxue", "file name (without extension) of the AuxUE and its spec")
	fs.StringVar(&c.Checkpoint, "checkpoint", "out/auxue.ckpt", "checkpoint written after every epoch (weights, optimizer, epoch)")
	fs.BoolVar(&c.Resume, "resume", false, "continue from --checkpoint when it exists (same data, seed and epochs)")
	fs.StringVar(&c.CacheDir, "cache-dir", "out/cache", "on-disk cache of the depth model's outputs and errors (\"\" = temporary)")
	fs.StringVar(&f.Summary, "summary", "out/auxue-train.json", "JSON summary of the run")
	fs.StringVar(&f.Library, "library", "", "ONNX Runtime library (default: $ONNXRUNTIME_LIB, then third_party/)")
	fs.StringVar(&f.Providers, "providers", "cpu", "execution providers of the depth model, in order: tensorrt, cuda, cpu")
	fs.BoolVar(&f.Progress, "progress", true, "draw a progress bar with ETA on stderr")
	fs.Int64Var(&c.Seed, "seed", d.Seed, "seed of the frame pool (use the depth run's), the order and the weights")
	fs.IntVar(&c.Drives, "drives", d.Drives, "simulated pool: training drives (as for train depth)")
	fs.IntVar(&c.FramesPerDrive, "frames-per-drive", d.FramesPerDrive, "simulated pool: frame indices per drive (as for train depth)")
	fs.IntVar(&c.Width, "width", d.Width, "simulated pool: rendered frame width")
	fs.IntVar(&c.Height, "height", d.Height, "simulated pool: rendered frame height")
	fs.IntVar(&c.Frames, "frames", 0, "frames drawn from the pool (default 300), or at most this many of --split (0: all)")
	fs.IntVar(&c.ValFrames, "val-frames", 0, "validation frames (pool default 16; --data: at most this many of --val-split, 0: all)")
	fs.IntVar(&c.DomainFrames, "domain-frames", DefaultDomainFrames, "held-out training-domain frames the spec's domain record is fitted on (pool: drives after the validation drives; --data: at most this many of --val-split); -1: no record")
	fs.StringVar(&c.DomainStatistic, "domain-statistic", "knn", "the domain record's statistic: knn or mahalanobis (docs/alerts.md compares them)")
	fs.IntVar(&c.Epochs, "epochs", d.Epochs, fmt.Sprintf("epochs over the cached frames; 0: as many as make about --steps optimizer steps (ceil(steps / (frames/batch)), %d to %d)", MinAutoEpochs, MaxAutoEpochs))
	fs.IntVar(&c.Steps, "steps", d.Steps, "with --epochs 0: the optimizer steps that the epochs aim at")
	fs.IntVar(&c.Batch, "batch", d.Batch, "frames per step")
	fs.Float64Var(&c.LR, "lr", d.LR, "initial learning rate (poly decay 0.9 to 1e-5)")
	fs.IntVar(&c.Factor, "factor", d.Factor, "the AuxUE's block size in input pixels (its grid is 1/factor of the input)")
	fs.BoolVar(&c.NoRow, "no-row", d.NoRow, "leave the row coordinate out of the AuxUE's input")
	fs.Float64Var(&c.MaxDepth, "max-depth", d.MaxDepth, "metric depth cap: the depth channel is min(d, cap)/cap")
	fs.IntVar(&c.EncoderWidth, "encoder-width", d.EncoderWidth, "channels of each AuxUE encoder")
	fs.IntVar(&c.Hidden, "hidden", d.Hidden, "hidden channels of the DIDO head")
	fs.IntVar(&c.K, "k", d.K, "DIDO bins")
	fs.Float64Var(&c.Lambda, "lambda", d.Lambda, "DIDO KL weight")
	fs.BoolVar(&c.GlobalContext, "global-context", d.GlobalContext, "join each pixel's DIDO features with the frame's channel means (--global-context=false: local features only)")
	fs.Float64Var(&c.UnlabeledKL, "unlabeled-kl", d.UnlabeledKL, "weight gamma of the DIDO KL on blocks without ground truth (0: labeled blocks only, strict eq. 4)")
	fs.IntVar(&c.GlobalContextBands, "global-context-bands", d.GlobalContextBands, "with --global-context: horizontal bands whose channel means are joined (0 or 1: the whole frame)")
	fs.Float64Var(&c.Outliers, "outliers", d.Outliers, "fraction of batch items replaced by a layout outlier without ground truth (0: none)")
	fs.StringVar(&f.OutlierKinds, "outlier-kinds", outlierKindsString(d.OutlierKinds), "layout outliers to draw from: flip, tiles")
	fs.StringVar(&c.ModelFeatures, "model-features", d.ModelFeatures, "a tensor of the depth model that the AuxUE also reads: auto (the last one the graph computes at the finest resolution from 1/4 to 1/8 of the input, with 8 channels or more; none: image and depth only), off, confidence (the depth model's confidence output, its spec's confidence.name, as one input channel), or a tensor name")
	fs.StringVar(&c.FeatureHeads, "model-features-heads", d.FeatureHeads, "which heads read --model-features: both, or dido (the Laplace head on the image and the depth alone)")
	fs.StringVar(&c.Teacher.Model, "teacher", "", "a teacher depth model (ONNX, larger than --depth, run offline) whose depth is the target on frames without ground truth (real ground truth wins per pixel)")
	fs.StringVar(&c.Teacher.Spec, "teacher-spec", "", "IO spec YAML of the teacher (default: the teacher's path with .yaml)")
	fs.StringVar(&c.Teacher.AuxUE, "teacher-auxue", "", "the teacher's own AuxUE: its epistemic K/S is the teacher's confidence read-out (marks the sky a LiDAR-trained teacher puts within its range)")
	fs.StringVar(&c.Teacher.AuxUESpec, "teacher-auxue-spec", "", "IO spec YAML of --teacher-auxue (default: beside it)")
	fs.Float64Var(&c.Teacher.MaxDepth, "teacher-max-depth", 0, "the teacher's range in metres: pixels it puts at or beyond it get no target, as the sky (0: --max-depth)")
	fs.StringVar(&c.Teacher.Mask, "teacher-mask", "", "PNG of the frames' size: its black pixels never get a teacher target (bonnet, mount)")
	fs.Float64Var(&c.Teacher.MaxUncertainty, "teacher-max-uncertainty", TeacherBoundAuto, "drop the teacher's pixels whose confidence read-out u exceeds this (its --teacher-auxue's K/S, or its spec's confidence output; 0: off; -1: with --teacher-auxue, the K/S of half the evidence its DIDO head holds on its training pixels, K/(K + 1/(2 lambda)), else off)")
	fs.Float64Var(&c.Teacher.ConfidenceDrop, "teacher-confidence-drop", 0, "drop, per frame, this fraction of the teacher's least confident pixels (K/S of --teacher-auxue, or its spec's confidence output; any convention, rankings included)")
	fs.Float64Var(&c.Teacher.BlockShare, "teacher-block-share", 1, "a block of the AuxUE's grid gets the teacher's targets only where the teacher vouches for at least this share of its pixels (else none of them: scattered accepted sky pixels would make the block known; 1: all of them; 0: per pixel)")
	fs.IntVar(&c.Teacher.Batch, "teacher-batch", 4, "frames per run of the teacher (a fixed-batch teacher runs from a copy made dynamic; 1: one frame a run)")
	fs.BoolVar(&c.IgnoreGroundTruth, "ignore-ground-truth", false, "with --teacher: leave the frames' own ground truth out (teacher targets only; to measure a teacher against ground truth on the same frames)")
	fs.IntVar(&c.ModelFeatureChannels, "model-feature-channels", d.ModelFeatureChannels, "the most channels the AuxUE makes of the depth model's tensor (a seeded random projection when it has more)")
}

// AuxRun is the run the flags describe, its recipe checked before anything
// is loaded; args (the command's arguments) are kept in its summary, and
// the progress bar (--progress) goes to progress.
func (f *AuxFlags) AuxRun(args []string, log *slog.Logger, progress io.Writer) (AuxRun, error) {
	cfg := f.Train
	var err error
	if cfg.OutlierKinds, err = auxue.ParseOutlierKinds(f.OutlierKinds); err != nil {
		return AuxRun{}, fmt.Errorf("flag -outlier-kinds: %w", err)
	}
	if cfg.Inference, err = onnxrt.ParseProviders(f.Providers, f.Library); err != nil {
		return AuxRun{}, fmt.Errorf("flag -providers: %w", err)
	}
	if cfg.DepthSpec == "" {
		cfg.DepthSpec = strings.TrimSuffix(cfg.DepthModel, filepath.Ext(cfg.DepthModel)) + ".yaml"
	}
	if err := cfg.Teacher.check(); err != nil {
		return AuxRun{}, err
	}
	cfg.Log = log
	if err := cfg.CheckRecipe(); err != nil {
		return AuxRun{}, err
	}
	if f.Progress {
		cfg.Progress = progress
	}
	return AuxRun{Train: cfg, Out: f.Out, Name: f.Name, Args: args}, nil
}

// OpenData opens --data and --kitti-depth (directories or s3:// prefixes)
// through store: training reads each frame once, through the FS, into the
// depth cache (--cache-dir, local), and the epochs read the cache.
func (r *AuxRun) OpenData(ctx context.Context, store *objstore.Store) error {
	c := &r.Train
	for _, d := range []struct {
		flag, loc string
		fsys      *iofs.FS
	}{{"--data", c.Data, &c.DataFS}, {"--kitti-depth", c.KITTIDepth, &c.KITTIDepthFS}} {
		if d.loc == "" {
			continue
		}
		var err error
		if *d.fsys, err = store.DirFS(ctx, d.loc); err != nil {
			return fmt.Errorf("%s %s: %w", d.flag, d.loc, err)
		}
	}
	return nil
}

func outlierKindsString(kinds []auxue.OutlierKind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

// WriteSummary writes a run's summary as indented JSON to path (creating
// its directory) and prints the same to w.
func WriteSummary(path string, v any, w io.Writer) error {
	if err := WriteJSON(path, v); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
