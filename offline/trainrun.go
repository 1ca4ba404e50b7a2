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

// Run trains the AuxUE and writes it with its spec.
func (r AuxRun) Run(ctx context.Context) (AuxStats, error) {
	cfg := r.Train
	cfg.defaults()
	if cfg.Checkpoint != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.Checkpoint), 0o755); err != nil {
			return AuxStats{}, fmt.Errorf("create checkpoint directory: %w", err)
		}
	}
	start := time.Now()
	model, st, err := AuxTrain(ctx, cfg)
	if err != nil {
		return AuxStats{}, err
	}
	dspec, err := ReadSpec(cfg.DepthSpec, infer.KindDepth)
	if err != nil {
		return AuxStats{}, err
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
	path, spec, err := WriteAuxArtifacts(model, st.Contract.InputContract, dspec, info, r.Out, r.Name)
	if err != nil {
		return AuxStats{}, err
	}
	if cfg.DomainFrames > 0 {
		td := time.Now()
		rec, err := addDomainRecord(ctx, cfg.AuxDepthModel, cfg.AuxData, cfg.Seed, cfg.AuxDomain, path, spec, cfg.Log)
		if err != nil {
			return AuxStats{}, fmt.Errorf("train auxue: %w", err)
		}
		if rec != nil {
			t, _ := rec.Threshold(0.01)
			st.Domain = &AuxDomainSummary{Frames: rec.Frames, Statistic: rec.Statistic, Shrinkage: Float(rec.Shrinkage),
				ThresholdFAR1: Float(t), Source: rec.Source, Seconds: Float(time.Since(td).Seconds())}
		}
	}
	st.Model, st.Spec = path, spec
	st.Phases.Export = since(texp)
	st.WallS, st.Args = time.Since(start).Seconds(), r.Args
	return st, nil
}
