package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/runtime/infer"
)

// Float is a figure of a JSON summary: NaN and Inf (figures that could not
// be computed) are written as null.
type Float float64

// MarshalJSON writes null for NaN and Inf.
func (f Float) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// WriteJSON writes v as indented JSON to path, creating its directory.
func WriteJSON(path string, v any) error {
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

// DepthRun is `didoedge train depth`: train the reference network (or
// load a checkpoint and only validate), save the checkpoint, export the
// model and its IO spec.
type DepthRun struct {
	Train depthtrain.TrainConfig
	// Out is the directory of depth.onnx and depth.yaml.
	Out string
	// Checkpoint is written at the end of training.
	Checkpoint string
	// FromCheckpoint skips training: the weights are loaded from it.
	FromCheckpoint string
	// Untrained skips training: the network is exported with its seeded
	// initial weights (deterministic; a size and speed stand-in, its depth
	// means nothing, e.g. the large GPU benchmark model).
	Untrained bool
	// ExportWidth is the exported model's input width (default 640); the
	// network's height is Train.Net.Height.
	ExportWidth int
	// Args are the command's arguments, kept in the summary.
	Args []string
}

// DepthSummary is the JSON summary of a DepthRun.
type DepthSummary struct {
	Model          string   `json:"model"`
	Spec           string   `json:"spec"`
	Checkpoint     string   `json:"checkpoint"`
	Seed           int64    `json:"seed"`
	Steps          int      `json:"steps"`
	DistinctFrames int      `json:"distinct_frames"`
	FirstLoss      Float    `json:"first_loss"`
	LastLoss       Float    `json:"last_loss"`
	ValAbsRel      Float    `json:"val_absrel"`
	WallS          float64  `json:"wall_s"`
	Args           []string `json:"args"`
	Untrained      bool     `json:"untrained"`
	Input          string   `json:"input"`
}

// Run trains (or loads) and exports the network.
func (r DepthRun) Run(ctx context.Context) (DepthSummary, error) {
	cfg := r.Train
	if r.ExportWidth == 0 {
		r.ExportWidth = 640
	}
	if h := cfg.Net.Height; h != 0 && h != 192 && !r.Untrained && r.FromCheckpoint == "" {
		return DepthSummary{}, fmt.Errorf("network height %d: training renders 192-row frames; export it untrained or from a checkpoint of that height", h)
	}
	start := time.Now()
	var net *depthnet.Net
	var st depthtrain.TrainStats
	var err error
	if r.Untrained {
		if net, err = depthnet.New(cfg.Net); err != nil {
			return DepthSummary{}, err
		}
	} else if r.FromCheckpoint != "" {
		if net, err = depthnet.New(cfg.Net); err != nil {
			return DepthSummary{}, err
		}
		if _, err := nn.LoadCheckpointFile(r.FromCheckpoint, net.Params()); err != nil {
			return DepthSummary{}, err
		}
		st.Steps, st.DistinctFrames = cfg.Steps, cfg.Drives*cfg.FramesPerDrive
		if st.ValAbsRel, err = depthtrain.Validate(net, cfg); err != nil {
			return DepthSummary{}, err
		}
	} else {
		if net, st, err = depthtrain.Train(ctx, cfg); err != nil {
			return DepthSummary{}, err
		}
		if err := os.MkdirAll(filepath.Dir(r.Checkpoint), 0o755); err != nil {
			return DepthSummary{}, fmt.Errorf("create checkpoint directory: %w", err)
		}
		if err := nn.SaveCheckpointFile(r.Checkpoint, net.Params(), map[string]string{
			"seed": fmt.Sprint(cfg.Seed), "steps": fmt.Sprint(cfg.Steps), "width_mult": fmt.Sprint(cfg.Net.Width)}); err != nil {
			return DepthSummary{}, err
		}
	}
	model, spec, err := WriteDepthArtifacts(net, r.Out, "depth", r.ExportWidth)
	if err != nil {
		return DepthSummary{}, err
	}
	return DepthSummary{Model: model, Spec: spec, Checkpoint: r.Checkpoint, Seed: cfg.Seed, Steps: st.Steps,
		DistinctFrames: st.DistinctFrames, FirstLoss: Float(st.FirstLoss), LastLoss: Float(st.LastLoss),
		ValAbsRel: Float(st.ValAbsRel), WallS: time.Since(start).Seconds(), Args: r.Args,
		Untrained: r.Untrained, Input: fmt.Sprintf("%dx%d", r.ExportWidth, cfg.Net.Height)}, nil
}

// AuxRun is `didoedge train auxue`: train the generalized AuxUE on a
// frozen depth model's errors and export it with its input contract.
type AuxRun struct {
	Train AuxTrainConfig
	// Out and Name: the AuxUE is written as Out/Name.onnx with its spec.
	Out, Name string
	// Args are the command's arguments, kept in the summary.
	Args []string
}

// AuxSummary is the JSON summary of an AuxRun.
type AuxSummary struct {
	Model            string             `json:"model"`
	Spec             string             `json:"spec"`
	Checkpoint       string             `json:"checkpoint"`
	Seed             int64              `json:"seed"`
	Frames           int                `json:"frames"`
	ValFrames        int                `json:"val_frames"`
	Steps            int                `json:"steps"`
	ResumedFromEpoch int                `json:"resumed_from_epoch"`
	FirstLoss        Float              `json:"first_loss"`
	LastLoss         Float              `json:"last_loss"`
	FirstLaplace     Float              `json:"first_laplace"`
	LastLaplace      Float              `json:"last_laplace"`
	FirstDIDO        Float              `json:"first_dido"`
	LastDIDO         Float              `json:"last_dido"`
	DepthTrainAbsRel Float              `json:"depth_train_absrel"`
	DepthModel       string             `json:"depth_model"`
	DepthSHA256      string             `json:"depth_sha256"`
	Provider         string             `json:"provider"`
	Relative         bool               `json:"relative"`
	Contract         AuxContractSummary `json:"contract"`
	// Epochs run, and whether they followed the frames (AutoEpochs).
	EpochsRun  int  `json:"epochs_run"`
	EpochsAuto bool `json:"epochs_auto"`
	// ModelFeatures is the depth model's tensor the AuxUE reads (absent:
	// none).
	ModelFeatures *AuxFeatureSummary `json:"model_features,omitempty"`
	// Teacher is the teacher's labelling (absent: no teacher).
	Teacher *AuxTeacherSummary `json:"teacher,omitempty"`
	Epochs  []AuxEpochSummary  `json:"epochs"`
	// Domain is the training-domain record written into the spec (nil:
	// none, --domain-frames -1 or no held-out split).
	Domain        *AuxDomainSummary    `json:"domain,omitempty"`
	Cache         AuxCacheSummary      `json:"cache"`
	ThroughputFPS AuxThroughputSummary `json:"throughput_fps"`
	PhasesS       map[string]float64   `json:"phases_s"`
	WallS         float64              `json:"wall_s"`
	Args          []string             `json:"args"`
}

// AuxTeacherSummary is a run's teacher in a summary: who labelled how many
// target pixels of the training and validation frames.
type AuxTeacherSummary struct {
	Model          string          `json:"model"`
	SHA256         string          `json:"sha256"`
	Provider       string          `json:"provider"`
	Relative       bool            `json:"relative"`
	MaxDepth       float64         `json:"max_depth"`
	Mask           string          `json:"mask,omitempty"`
	MaxUncertainty float64         `json:"max_uncertainty,omitempty"`
	ConfidenceDrop float64         `json:"confidence_drop,omitempty"`
	BlockShare     float64         `json:"block_share"`
	IgnoredGT      bool            `json:"ignored_ground_truth"`
	Train          AuxLabelSummary `json:"train"`
	Val            AuxLabelSummary `json:"val"`
	CacheDir       string          `json:"cache_dir"`
	FramesRun      int             `json:"frames_run"`
	FramesReused   int             `json:"frames_reused"`
	Seconds        float64         `json:"seconds"`
}

// AuxLabelSummary counts target pixels by source (LabelCounts).
type AuxLabelSummary struct {
	RealPixels          int64 `json:"real_pixels"`
	TeacherPixels       int64 `json:"teacher_pixels"`
	BeyondRangePixels   int64 `json:"beyond_range_pixels"`
	MaskedPixels        int64 `json:"masked_pixels"`
	LowConfidencePixels int64 `json:"low_confidence_pixels"`
	FramesWithGT        int   `json:"frames_with_ground_truth"`
}

func labelSummary(c LabelCounts) AuxLabelSummary {
	return AuxLabelSummary{RealPixels: c.Real, TeacherPixels: c.Teacher, BeyondRangePixels: c.BeyondRange, MaskedPixels: c.Masked,
		LowConfidencePixels: c.LowConfidence, FramesWithGT: c.FramesWithGT}
}

func teacherSummary(st AuxStats, ignored bool) *AuxTeacherSummary {
	t := st.Teacher
	if t == nil {
		return nil
	}
	return &AuxTeacherSummary{Model: t.Model, SHA256: t.SHA256, Provider: t.Provider, Relative: t.Relative, MaxDepth: t.MaxDepth, Mask: t.Mask,
		MaxUncertainty: t.MaxUncertainty, ConfidenceDrop: t.ConfidenceDrop, BlockShare: t.BlockShare, IgnoredGT: ignored, Train: labelSummary(t.Train), Val: labelSummary(t.Val),
		CacheDir: t.CacheDir, FramesRun: t.Frames - t.Reused, FramesReused: t.Reused, Seconds: t.Seconds}
}

// AuxContractSummary is the AuxUE's input contract in a summary.
type AuxContractSummary struct {
	Input    string `json:"input"`
	Factor   int    `json:"factor"`
	Grid     string `json:"grid"`
	Channels int    `json:"channels"`
	Row      bool   `json:"row"`
}

// AuxFeatureSummary is the depth model's tensor an AuxUE reads.
type AuxFeatureSummary struct {
	Tensor string `json:"tensor"`
	Shape  string `json:"shape"`
	// Resolution is the tensor's against the depth model's input, "1/r".
	Resolution string `json:"resolution"`
	// Channels the AuxUE makes of it (a projection when it has more than
	// --model-feature-channels, default auxue.DefaultModelFeatureChannels).
	Channels  int  `json:"channels"`
	Projected bool `json:"projected"`
	// Chosen: "auto" (ChooseFeatureTensor, out of Candidates rank-4
	// tensors, Eligible at 1/4 to 1/8) or "named".
	Chosen     string `json:"chosen"`
	Candidates int    `json:"candidates"`
	Eligible   int    `json:"eligible"`
}

// AuxDomainSummary is the training-domain record written into the spec.
type AuxDomainSummary struct {
	Frames        int    `json:"frames"`
	Statistic     string `json:"statistic"`
	Shrinkage     Float  `json:"shrinkage"`
	ThresholdFAR1 Float  `json:"threshold_far_0.01"`
	Source        string `json:"source"`
	Seconds       Float  `json:"seconds"`
}

// AuxEpochSummary is one epoch in a summary.
type AuxEpochSummary struct {
	Epoch       int   `json:"epoch"`
	Laplace     Float `json:"laplace"`
	DIDO        Float `json:"dido"`
	ValAUSERMSE Float `json:"val_ause_rmse"`
	ValAURGRMSE Float `json:"val_aurg_rmse"`
	ValSkyAUC   Float `json:"val_sky_auc"`
	ValNoGTAUC  Float `json:"val_no_gt_auc"`
	Seconds     Float `json:"seconds"`
}

// AuxCacheSummary is the on-disk cache in a summary.
type AuxCacheSummary struct {
	Dir               string  `json:"dir"`
	Bytes             int64   `json:"bytes"`
	Frames            int     `json:"frames"`
	Reused            int     `json:"reused"`
	ValFrames         int     `json:"val_frames"`
	ValReused         int     `json:"val_reused"`
	BytesPer100Frames float64 `json:"bytes_per_100_frames"`
}

// AuxThroughputSummary is the run's throughput in frames per second.
type AuxThroughputSummary struct {
	Cache Float `json:"cache"`
	Train Float `json:"train"`
}

// Run trains the AuxUE and writes it with its spec.
func (r AuxRun) Run(ctx context.Context) (AuxSummary, error) {
	cfg := r.Train
	cfg.defaults()
	if cfg.Checkpoint != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.Checkpoint), 0o755); err != nil {
			return AuxSummary{}, fmt.Errorf("create checkpoint directory: %w", err)
		}
	}
	start := time.Now()
	model, st, err := AuxTrain(ctx, cfg)
	if err != nil {
		return AuxSummary{}, err
	}
	dspec, err := ReadSpec(cfg.DepthSpec, infer.KindDepth)
	if err != nil {
		return AuxSummary{}, err
	}
	texp := time.Now()
	dataDesc := "simulated outdoor pool"
	if cfg.Data != "" {
		dataDesc = cfg.Data + " split " + cfg.Split
	}
	info := infer.AuxUEInfo{DepthModel: filepath.Base(cfg.DepthModel), DepthModelSHA256: st.DepthSHA256, Data: dataDesc, Frames: st.Frames}
	if t := st.Teacher; t != nil {
		info.Teacher = &infer.AuxUETeacher{Model: filepath.Base(t.Model), SHA256: t.SHA256, Relative: t.Relative, MaxDepth: t.MaxDepth,
			TeacherPixels: t.Train.Teacher, RealPixels: t.Train.Real, FramesWithGT: t.Train.FramesWithGT, IgnoredGroundTruth: cfg.IgnoreGroundTruth}
	}
	if n := len(st.Epochs); n > 0 && st.ValFrames > 0 && !math.IsNaN(st.Epochs[n-1].KS[0]) {
		ks := st.Epochs[n-1].KS
		info.Validation = &infer.AuxUEValidation{Frames: st.ValFrames, KSP50: ks[0], KSP90: ks[1], KSP99: ks[2]}
	}
	path, spec, err := WriteAuxArtifacts(model, st.Contract, dspec, info, r.Out, r.Name)
	if err != nil {
		return AuxSummary{}, err
	}
	var dom *AuxDomainSummary
	if cfg.DomainFrames > 0 {
		td := time.Now()
		rec, err := addDomainRecord(ctx, cfg, path, spec, cfg.Log)
		if err != nil {
			return AuxSummary{}, fmt.Errorf("train auxue: %w", err)
		}
		if rec != nil {
			t, _ := rec.Threshold(0.01)
			dom = &AuxDomainSummary{Frames: rec.Frames, Statistic: rec.Statistic, Shrinkage: Float(rec.Shrinkage),
				ThresholdFAR1: Float(t), Source: rec.Source, Seconds: Float(time.Since(td).Seconds())}
		}
	}
	exportTime := time.Since(texp)
	gh, gw := st.Contract.Grid()
	epochs := make([]AuxEpochSummary, len(st.Epochs))
	for i, e := range st.Epochs {
		epochs[i] = AuxEpochSummary{Epoch: e.Epoch, Laplace: Float(e.Laplace), DIDO: Float(e.DIDO),
			ValAUSERMSE: Float(e.AUSERMSE), ValAURGRMSE: Float(e.AURGRMSE), ValSkyAUC: Float(e.SkyAUC),
			ValNoGTAUC: Float(e.NoGTAUC), Seconds: Float(e.Seconds)}
	}
	ph := st.Phases
	return AuxSummary{
		Model: path, Spec: spec, Checkpoint: cfg.Checkpoint, Seed: cfg.Seed, Frames: st.Frames, ValFrames: st.ValFrames,
		Steps: st.Steps, ResumedFromEpoch: st.ResumedFrom,
		FirstLoss: Float(st.FirstLoss), LastLoss: Float(st.LastLoss), FirstLaplace: Float(st.FirstAlea), LastLaplace: Float(st.LastAlea),
		FirstDIDO: Float(st.FirstEpis), LastDIDO: Float(st.LastEpis), DepthTrainAbsRel: Float(st.MeanTrainAbsRel),
		DepthModel: cfg.DepthModel, DepthSHA256: st.DepthSHA256, Provider: st.Provider, Relative: st.Relative,
		Contract: AuxContractSummary{Input: fmt.Sprintf("%dx%d", st.Contract.Width, st.Contract.Height), Factor: st.Contract.Factor,
			Grid: fmt.Sprintf("%dx%d", gw, gh), Channels: st.Contract.Channels(), Row: st.Contract.Row},
		EpochsRun: st.EpochsRun, EpochsAuto: st.EpochsAuto, ModelFeatures: featureSummary(st), Teacher: teacherSummary(st, cfg.IgnoreGroundTruth),
		Epochs: epochs, Domain: dom,
		Cache: AuxCacheSummary{Dir: st.Cache.Dir, Bytes: st.Cache.Bytes, Frames: st.Cache.Frames, Reused: st.Cache.Reused,
			ValFrames: st.Cache.ValFrames, ValReused: st.Cache.ValRe, BytesPer100Frames: st.Cache.BytesPer100},
		ThroughputFPS: AuxThroughputSummary{Cache: Float(st.CacheFPS), Train: Float(st.TrainFPS)},
		PhasesS: map[string]float64{"open_depth_model": ph.Open.Seconds(), "load_frames": ph.Load.Seconds(), "depth_model": ph.Depth.Seconds(),
			"prepare": ph.Prepare.Seconds(), "cache_write": ph.CacheWrite.Seconds(), "batch": ph.Batch.Seconds(),
			"auxue_step": ph.Step.Seconds(), "optimizer": ph.Optimizer.Seconds(), "validate": ph.Validate.Seconds(),
			"checkpoint": ph.Checkpoint.Seconds(), "export": exportTime.Seconds()},
		WallS: time.Since(start).Seconds(), Args: r.Args,
	}, nil
}

func featureSummary(st AuxStats) *AuxFeatureSummary {
	f, mf := st.Features, st.Contract.Model
	if f == nil || mf == nil {
		return nil
	}
	chosen := "named"
	if f.Auto {
		chosen = FeaturesAuto
	}
	return &AuxFeatureSummary{Tensor: f.Tensor, Shape: fmt.Sprintf("1x%dx%dx%d", f.Channels, f.Height, f.Width),
		Resolution: fmt.Sprintf("1/%.2f", f.Ratio), Channels: mf.Out, Projected: mf.Projection != nil,
		Chosen: chosen, Candidates: f.Candidates, Eligible: f.Eligible}
}
