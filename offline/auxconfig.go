package offline

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/runtime/domain"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// AuxTrainConfig configures AuxTrain. Zero fields take the defaults in
// brackets. It is made of one part per stage of the run, each stage
// taking its part alone: the frozen depth model (AuxDepthModel), the
// frames (AuxData), what the AuxUE reads (AuxInputs), its heads
// (AuxHeads), the optimisation (AuxOptim), the teacher (AuxTeacher) and
// the training-domain record (AuxDomain); the parts are embedded, so
// their fields read as the config's own.
type AuxTrainConfig struct {
	AuxDepthModel
	AuxData
	AuxInputs
	AuxHeads
	AuxOptim
	AuxTeacher
	AuxDomain

	// Seed seeds the simulated pool's frames, the weights, the shuffle
	// and the layout outliers [1].
	Seed int64
	// CacheDir keeps the depth model's cached outputs and errors between
	// runs, keyed by the model's sha256, its spec, the data and the
	// contract ("" = a temporary cache).
	CacheDir string
	// Progress receives a progress bar with the rate and ETA (nil: none);
	// Log receives one line per epoch.
	Progress io.Writer
	Log      *slog.Logger
}

// AuxDepthModel is the frozen main model of an AuxUE training.
type AuxDepthModel struct {
	// DepthModel and DepthSpec are the frozen main model and its IO spec
	// (runtime/infer.IOSpec); Inference selects the ONNX Runtime library
	// and the execution providers (CPU by default; CUDA or TensorRT
	// where present).
	DepthModel, DepthSpec string
	Inference             onnxrt.Config
}

// AuxData is the frames an AuxUE trains and validates on.
type AuxData struct {
	// Data is a data set (dataset.Open: the sim render layout, real KITTI
	// with split files, NYU); "" draws frames from the simulated pool
	// rendered on the fly (the reference models).
	Data, Layout, KITTIDepth string
	// DataFS and KITTIDepthFS, when set, read Data and KITTIDepth (an S3
	// prefix; Data is then only its name). Each frame is read once, into
	// the cache that the epochs read.
	DataFS, KITTIDepthFS fs.FS
	// Split and ValSplit name the training and validation splits (names
	// or split files) [train, val]; ValSplit "none" skips validation.
	Split, ValSplit string

	// Drives and FramesPerDrive select the simulated pool's frames as for
	// the depth network (the AuxUE learns on the main model's training
	// distribution, as in the paper) [48, 200]; Width and Height are the
	// rendered size [640 x 192].
	Drives, FramesPerDrive int
	Width, Height          int
	// Frames is how many frames are drawn from the pool [300], or the
	// most frames of the training split (evenly spread; 0 = all).
	Frames int
	// ValFrames bounds the validation frames [16; pool: from ValDrives
	// drives after the training drives, 2].
	ValFrames, ValDrives int
}

// AuxInputs is what the AuxUE reads: its input contract over the depth
// model's input and depth, and the depth model's own tensor.
type AuxInputs struct {
	// MaxDepth bounds and scales the depth channel of a metric model
	// [80] and bounds an aligned relative depth.
	MaxDepth float64
	// Factor is the AuxUE's block size in input pixels [4]; Row adds the
	// row coordinate to its input [true, unless NoRow].
	Factor int
	NoRow  bool

	// ModelFeatures makes the AuxUE also read one of the depth model's own
	// tensors (auxue.ModelFeatures): FeaturesAuto picks it
	// (ChooseFeatureTensor; a model without one trains without), a
	// tensor name takes that tensor, "" or FeaturesOff none.
	ModelFeatures string
	// FeatureHeads is which heads read the depth model's tensor:
	// FeatureHeadsBoth, or FeatureHeadsDIDO (sigma_Theta2 only; the
	// Laplace head on the image and the depth alone,
	// auxue.Config.AleatoricInputs) ["" = both].
	FeatureHeads string
	// ModelFeatureChannels is the most channels made of that tensor (a
	// random projection when it has more) [auxue.DefaultModelFeatureChannels].
	ModelFeatureChannels int
}

// AuxHeads is the AuxUE's two heads and their losses.
type AuxHeads struct {
	// EncoderWidth and Hidden of the AuxUE [8, 8]; K and Lambda of DIDO [32, 0.01].
	EncoderWidth, Hidden, K int
	Lambda                  float64
	// UnlabeledKL keeps gamma * Lambda * KL(Dir(alpha) || Dir(1)) on the
	// blocks without ground truth (auxue.Config.UnlabeledKL).
	UnlabeledKL float64
	// GlobalContext joins each pixel's DIDO features with the frame's
	// channel means over GlobalContextBands horizontal bands.
	GlobalContext      bool
	GlobalContextBands int
}

// AuxOptim is the optimisation: epochs, batches, the learning rate, the
// layout outliers and the checkpoint.
type AuxOptim struct {
	// Epochs over the cached frames and the Batch size [15, 2]. With
	// Epochs 0 and Steps > 0 the epochs follow the frames: AutoEpochs.
	Epochs, Batch int
	// Steps is the number of optimizer steps that Epochs 0 aims at
	// (AutoEpochs); 0 keeps the default of 15 epochs.
	Steps int
	// LR decays polynomially (power 0.9) to EndLR [2e-3 -> 1e-5].
	LR, EndLR float64
	// Outliers is the fraction of batch items replaced by a layout outlier
	// of one of OutlierKinds (auxue.MaybeOutlier). 0 disables.
	Outliers     float64
	OutlierKinds []auxue.OutlierKind
	// Checkpoint is written after every epoch (weights, Adam's moments,
	// the epoch); with Resume an existing one is continued from.
	Checkpoint string
	Resume     bool
}

// AuxTeacher labels the frames without depth ground truth.
type AuxTeacher struct {
	// Teacher labels the frames without depth ground truth with a
	// second depth model's read-out (TeacherConfig); IgnoreGroundTruth
	// trains on the teacher's targets alone even where the frames have
	// ground truth (to measure a teacher against it on the same frames).
	Teacher           TeacherConfig
	IgnoreGroundTruth bool
}

// AuxDomain is the training-domain record written into the AuxUE's spec.
type AuxDomain struct {
	// DomainFrames: held-out training-domain frames the training-domain
	// record (runtime/domain) is fitted on after the export: the pool's
	// drives after the validation drives, or at most this many of
	// ValSplit [DefaultDomainFrames; negative: no record]. DomainStatistic
	// is the record's statistic [domain.KNN].
	DomainFrames    int
	DomainStatistic string
}

func (c *AuxTrainConfig) defaults() {
	depthtrain.PoolDefaults(&c.Drives, &c.FramesPerDrive, &c.Width, &c.Height)
	if c.Data == "" {
		setDefault(&c.Frames, 300)
		setDefault(&c.ValFrames, 16)
	}
	setDefault(&c.ValDrives, 2)
	setDefault(&c.DomainFrames, DefaultDomainFrames)
	setDefault(&c.DomainStatistic, domain.KNN)
	setDefault(&c.Split, "train")
	setDefault(&c.ValSplit, "val")
	if c.Steps <= 0 {
		setDefault(&c.Epochs, 15)
	}
	setDefault(&c.Batch, 2)
	setDefault(&c.EncoderWidth, 8)
	setDefault(&c.Hidden, 8)
	setDefault(&c.K, auxue.DefaultKDepth)
	setDefault(&c.MaxDepth, 80)
	setDefault(&c.Seed, 1)
	setDefault(&c.LR, 2e-3)
	setDefault(&c.EndLR, 1e-5)
	setDefault(&c.Lambda, auxue.DefaultLambdaDepth)
	setDefault(&c.Factor, 4)
}

// DefaultAuxTrainConfig is the recipe `didoedge train auxue` runs when no
// flag says otherwise (its flags' defaults), the best one measured on the
// byo walkthrough's data (docs/training.md, "The default recipe"): the
// 4-band global context, the unlabeled-block KL at gamma 0.1, a quarter
// of layout outliers, lr 6e-3, the epochs from the frames (AutoEpochs with
// DefaultAuxSteps), and the depth model's own feature tensor when it has
// one (ModelFeatures auto) read by the DIDO head only (FeatureHeadsDIDO:
// measured best per head on the simulated world and the new camera,
// docs/training.md "The feature input per head"). The zero AuxTrainConfig
// of Go callers keeps its own meaning (no context, no outliers, 15 epochs,
// no model tensor).
func DefaultAuxTrainConfig() AuxTrainConfig {
	c := AuxTrainConfig{
		AuxOptim: AuxOptim{Epochs: 0, Steps: DefaultAuxSteps, LR: 6e-3, Outliers: 0.25,
			OutlierKinds: []auxue.OutlierKind{auxue.OutlierFlip, auxue.OutlierTiles}},
		AuxHeads:  AuxHeads{UnlabeledKL: 0.1, GlobalContext: true, GlobalContextBands: 4},
		AuxInputs: AuxInputs{ModelFeatures: FeaturesAuto, ModelFeatureChannels: auxue.DefaultModelFeatureChannels, FeatureHeads: FeatureHeadsDIDO},
	}
	c.defaults()
	return c
}

// DefaultAuxSteps is the optimizer steps that the default recipe's epochs
// aim at (AutoEpochs).
const DefaultAuxSteps = 2000

// CheckRecipe checks the recipe's values that AuxTrain would otherwise
// only meet after the depth model and the frames are loaded.
func (c AuxTrainConfig) CheckRecipe() error {
	switch {
	case c.Epochs < 0:
		return fmt.Errorf("--epochs %d: want 0 (from the frames, --steps) or more", c.Epochs)
	case c.Epochs == 0 && c.Steps < 1:
		return fmt.Errorf("--epochs 0 takes the epochs from the frames and --steps, but --steps is %d", c.Steps)
	case c.Batch < 1:
		return fmt.Errorf("--batch %d: want 1 or more", c.Batch)
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("--lr %g: want a positive learning rate", c.LR)
	case c.Outliers < 0 || c.Outliers >= 1 || (c.Outliers > 0 && len(c.OutlierKinds) == 0):
		return fmt.Errorf("--outliers %g with --outlier-kinds %v: want a fraction in [0, 1) and a kind", c.Outliers, c.OutlierKinds)
	case c.GlobalContextBands < 0:
		return fmt.Errorf("--global-context-bands %d: want 0 or more", c.GlobalContextBands)
	case c.IgnoreGroundTruth && !c.Teacher.Enabled():
		return errors.New("--ignore-ground-truth needs --teacher (without ground truth nothing labels the frames)")
	case c.FeatureHeads != "" && c.FeatureHeads != FeatureHeadsBoth && c.FeatureHeads != FeatureHeadsDIDO:
		return fmt.Errorf("--model-features-heads %q: want %s or %s", c.FeatureHeads, FeatureHeadsBoth, FeatureHeadsDIDO)
	case c.ModelFeatures == "":
		return fmt.Errorf("--model-features: empty; want auto, off or a tensor name of the depth model")
	case c.ModelFeatureChannels < 0 || (c.ModelFeatureChannels == 0 && c.ModelFeatures != FeaturesOff):
		return fmt.Errorf("--model-feature-channels %d: want 1 or more", c.ModelFeatureChannels)
	}
	return nil
}

// AuxModelConfig is the generalized AuxUE of the depth task: dense, input
// the contract's features (in channels), separate encoders, Laplace
// sigma_Theta1, DIDO sigma_Theta2.
func (c AuxTrainConfig) AuxModelConfig(in int) auxue.Config {
	c.defaults()
	return auxue.Config{Form: auxue.FormDense, In: in, EncoderWidth: c.EncoderWidth,
		SharedEncoder: false, Hidden: c.Hidden, Aleatoric: auxue.AleatoricLoss{Kind: auxue.Laplace},
		K: c.K, Lambda: c.Lambda, UnlabeledKL: c.UnlabeledKL, GlobalContext: c.GlobalContext, GlobalContextBands: c.GlobalContextBands, Seed: uint64(c.Seed)}
}

// resolveFeatures resolves AuxTrainConfig.ModelFeatures to a tensor of
// the depth model (ok false: none).
func resolveFeatures(dm AuxDepthModel, in AuxInputs, spec infer.IOSpec) (FeatureChoice, bool, error) {
	switch in.ModelFeatures {
	case "", FeaturesOff:
		return FeatureChoice{}, false, nil
	case FeaturesAuto:
		return ChooseFeatureTensor(dm.DepthModel, spec, dm.Inference.Library)
	case FeaturesConfidence:
		if spec.Confidence == nil {
			return FeatureChoice{}, false, fmt.Errorf("--model-features confidence: the depth spec %q declares no confidence output (confidence: {name: ..., meaning: ...})", dm.DepthSpec)
		}
		fc, err := NamedFeatureTensor(dm.DepthModel, spec, dm.Inference.Library, spec.Confidence.Name)
		return fc, err == nil, err
	}
	fc, err := NamedFeatureTensor(dm.DepthModel, spec, dm.Inference.Library, in.ModelFeatures)
	return fc, err == nil, err
}

// AutoEpochs is the epochs of a run that leaves them to the data: enough
// epochs of frames/batch steps to make about steps optimizer steps
// (ceil), at least MinAutoEpochs and at most MaxAutoEpochs. A small
// folder trains as many steps as a large one, each frame more often.
func AutoEpochs(frames, batch, steps int) int {
	per := max(frames/max(batch, 1), 1)
	return min(max((steps+per-1)/per, MinAutoEpochs), MaxAutoEpochs)
}

// AuxContract is the AuxUE input contract for a depth model's spec: its
// image input read as is (layout, channel order, scaling), the depth in the
// spec's units, blocks of factor pixels, the grid padded to the DIDO head's
// bands.
func AuxContract(spec infer.IOSpec, factor, bands int, maxDepth float64, row bool) (auxue.InputContract, error) {
	pt := spec.Pixels()
	ch := spec.Input.Channels
	if ch == 0 {
		ch = 3
	}
	img, err := auxue.ImageFromPixels(spec.Layout() == infer.LayoutNHWC, ch, pt.Order, pt.Gain, pt.Offset)
	if err != nil {
		return auxue.InputContract{}, err
	}
	c := auxue.InputContract{Height: spec.Input.Height, Width: spec.Input.Width, Image: img, Factor: factor, Bands: bands,
		MaxDepth: float32(maxDepth), Relative: spec.Relative(), Row: row}
	return c, c.Validate()
}

// ReadSpec reads and checks a model's IO spec of the given kind.
func ReadSpec(path, kind string) (infer.IOSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return infer.IOSpec{}, fmt.Errorf("io spec: %w", err)
	}
	return infer.ParseIOSpecKind(data, path, kind)
}
