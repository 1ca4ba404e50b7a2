package offline

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/didoedge/didoedge/auxue"
)

// AuxStats is what an AuxUE run reports, and it is the run's JSON summary
// as `train auxue` writes it (--summary): AuxTrain fills the training's
// figures, AuxRun.Run the written files, the domain record, the export's
// time and the wall time. The field order is the summary's key order.
type AuxStats struct {
	// Model and Spec are the written AuxUE and its IO spec (AuxRun.Run).
	Model      string `json:"model"`
	Spec       string `json:"spec"`
	Checkpoint string `json:"checkpoint"`
	Seed       int64  `json:"seed"`
	Frames     int    `json:"frames"`
	ValFrames  int    `json:"val_frames"`
	Steps      int    `json:"steps"`
	// ResumedFrom is the epochs already done by the checkpoint (0: a
	// fresh run).
	ResumedFrom int `json:"resumed_from_epoch"`
	// The mean losses of the first and last epoch run: total, Laplace
	// (aleatoric) and DIDO (epistemic).
	FirstLoss Float `json:"first_loss"`
	LastLoss  Float `json:"last_loss"`
	FirstAlea Float `json:"first_laplace"`
	LastAlea  Float `json:"last_laplace"`
	FirstEpis Float `json:"first_dido"`
	LastEpis  Float `json:"last_dido"`
	// MeanTrainAbsRel is the frozen depth model's AbsRel on the training
	// frames (aligned for a relative model).
	MeanTrainAbsRel Float  `json:"depth_train_absrel"`
	DepthModel      string `json:"depth_model"`
	DepthSHA256     string `json:"depth_sha256"`
	Provider        string `json:"provider"`
	Relative        bool   `json:"relative"`
	// Contract is the AuxUE's input contract.
	Contract TrainedContract `json:"contract"`
	// EpochsRun is the epochs of the run, EpochsAuto whether they
	// followed the frames (AutoEpochs).
	EpochsRun  int  `json:"epochs_run"`
	EpochsAuto bool `json:"epochs_auto"`
	// Features is the depth model's tensor the AuxUE reads (nil: none).
	Features *AuxFeatureSummary `json:"model_features,omitempty"`
	// Teacher reports the teacher's labelling (nil: no teacher).
	Teacher *TeacherReport `json:"teacher,omitempty"`
	Epochs  []EpochReport  `json:"epochs"`
	// Domain is the training-domain record written into the spec (nil:
	// none, --domain-frames -1 or no held-out split).
	Domain     *AuxDomainSummary `json:"domain,omitempty"`
	Cache      CacheReport       `json:"cache"`
	Throughput Throughput        `json:"throughput_fps"`
	Phases     PhaseTimes        `json:"phases_s"`
	WallS      float64           `json:"wall_s"`
	// Args are the command's arguments.
	Args []string `json:"args"`
}

// TrainedContract is the AuxUE's input contract; in a summary its input
// size, block factor, grid, channels and row coordinate.
type TrainedContract struct{ auxue.InputContract }

// MarshalJSON writes the contract's summary.
func (c TrainedContract) MarshalJSON() ([]byte, error) {
	gh, gw := c.Grid()
	return json.Marshal(struct {
		Input    string `json:"input"`
		Factor   int    `json:"factor"`
		Grid     string `json:"grid"`
		Channels int    `json:"channels"`
		Row      bool   `json:"row"`
	}{fmt.Sprintf("%dx%d", c.Width, c.Height), c.Factor, fmt.Sprintf("%dx%d", gw, gh), c.Channels(), c.Row})
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

// featureSummary describes the tensor f that the AuxUE reads through mf.
func featureSummary(f FeatureChoice, mf *auxue.ModelFeatures) *AuxFeatureSummary {
	chosen := "named"
	if f.Auto {
		chosen = FeaturesAuto
	}
	return &AuxFeatureSummary{Tensor: f.Tensor, Shape: fmt.Sprintf("1x%dx%dx%d", f.Channels, f.Height, f.Width),
		Resolution: fmt.Sprintf("1/%.2f", f.Ratio), Channels: mf.Out, Projected: mf.Projection != nil,
		Chosen: chosen, Candidates: f.Candidates, Eligible: f.Eligible}
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

// EpochReport is one epoch's losses and validation figures (NaN where
// not computed, null in the summary). Validation runs the Go AuxUE on the
// validation frames' cached features, at the AuxUE's grid.
type EpochReport struct {
	Epoch    int   `json:"epoch"`
	Laplace  Float `json:"laplace"`
	DIDO     Float `json:"dido"`
	AUSERMSE Float `json:"val_ause_rmse"`
	AURGRMSE Float `json:"val_aurg_rmse"`
	SkyAUC   Float `json:"val_sky_auc"`
	NoGTAUC  Float `json:"val_no_gt_auc"`
	// KS holds the 0.5, 0.9 and 0.99 quantiles of K/S over every block of
	// the validation frames (NaN without validation frames); the spec
	// keeps the last epoch's (infer.AuxUEValidation).
	KS      [3]float64 `json:"-"`
	Seconds Float      `json:"seconds"`
}

// CacheReport describes the on-disk cache.
type CacheReport struct {
	Dir   string `json:"dir"`
	Bytes int64  `json:"bytes"`
	// Frames are the training records, Reused of them from an earlier
	// run; ValFrames and ValReused the same of the validation frames.
	Frames      int     `json:"frames"`
	Reused      int     `json:"reused"`
	ValFrames   int     `json:"val_frames"`
	ValReused   int     `json:"val_reused"`
	BytesPer100 float64 `json:"bytes_per_100_frames"`
}

// Throughput is a run's frames per second: through the depth model into
// the cache, and frame-steps of training.
type Throughput struct {
	Cache Float `json:"cache"`
	Train Float `json:"train"`
}

// PhaseTimes splits a run's wall time; the summary writes each in seconds
// (its fields are in the order of their keys, as a JSON object of a map
// would be).
type PhaseTimes struct {
	Step       Seconds `json:"auxue_step"` // AuxUE forward, losses, backward
	Batch      Seconds `json:"batch"`      // reading the cache, layout outliers, discretization
	CacheWrite Seconds `json:"cache_write"`
	Checkpoint Seconds `json:"checkpoint"`
	Depth      Seconds `json:"depth_model"` // the depth model in ONNX Runtime
	Export     Seconds `json:"export"`      // writing the AuxUE and its spec, the domain record
	Load       Seconds `json:"load_frames"` // reading or rendering frames
	Open       Seconds `json:"open_depth_model"`
	Optimizer  Seconds `json:"optimizer"`
	Prepare    Seconds `json:"prepare"` // features, alignment, block errors
	Validate   Seconds `json:"validate"`
}

// Seconds is a duration that a summary writes in seconds.
type Seconds time.Duration

// since is the time since t.
func since(t time.Time) Seconds { return Seconds(time.Since(t)) }

// Float64 is the duration in seconds.
func (s Seconds) Float64() float64 { return time.Duration(s).Seconds() }

// MarshalJSON writes the seconds.
func (s Seconds) MarshalJSON() ([]byte, error) { return json.Marshal(s.Float64()) }
