package offline

import (
	"time"

	"github.com/didoedge/didoedge/auxue"
)

// AuxStats summarizes an AuxUE run.
type AuxStats struct {
	Frames, ValFrames, Steps int
	Contract                 auxue.InputContract
	Relative                 bool
	FirstLoss, LastLoss      float64 // mean total loss of the first and last epoch run
	FirstAlea, LastAlea      float64
	FirstEpis, LastEpis      float64
	MeanTrainAbsRel          float64 // the frozen depth model's AbsRel on the training frames (aligned for a relative model)
	ResumedFrom              int     // epochs already done by the checkpoint (0: a fresh run)
	EpochsRun                int     // the epochs of the run (AutoEpochs when the config left them to the frames)
	EpochsAuto               bool
	// Features is the depth model's tensor the AuxUE reads (nil: none).
	Features *FeatureChoice
	// Teacher reports the teacher's labelling (nil: no teacher).
	Teacher            *TeacherReport
	Epochs             []EpochReport
	Cache              CacheReport
	Phases             PhaseTimes
	DepthSHA256        string
	Provider           string
	CacheFPS, TrainFPS float64 // frames per second: through the depth model into the cache; frame-steps of training
}

// EpochReport is one epoch's losses and validation figures (NaN where
// not computed). Validation runs the Go AuxUE on the validation frames'
// cached features, at the AuxUE's grid.
type EpochReport struct {
	Epoch              int     `json:"epoch"`
	Laplace            float64 `json:"laplace"`
	DIDO               float64 `json:"dido"`
	AUSERMSE, AURGRMSE float64 `json:"-"`
	SkyAUC, NoGTAUC    float64 `json:"-"`
	// KS holds the 0.5, 0.9 and 0.99 quantiles of K/S over every block of
	// the validation frames (NaN without validation frames).
	KS      [3]float64 `json:"-"`
	Seconds float64    `json:"seconds"`
}

// CacheReport describes the on-disk cache.
type CacheReport struct {
	Dir              string
	Bytes            int64
	Frames, Reused   int // records, and how many came from an earlier run
	BytesPer100      float64
	ValFrames, ValRe int
}

// PhaseTimes splits a run's wall time.
type PhaseTimes struct {
	Open       time.Duration // loading the depth model into ONNX Runtime
	Load       time.Duration // reading or rendering frames
	Depth      time.Duration // the depth model in ONNX Runtime
	Prepare    time.Duration // features, alignment, block errors
	CacheWrite time.Duration
	Batch      time.Duration // reading the cache, layout outliers, discretization
	Step       time.Duration // AuxUE forward, losses, backward
	Optimizer  time.Duration
	Validate   time.Duration
	Checkpoint time.Duration
}
