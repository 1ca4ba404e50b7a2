package offline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/internal/manifest"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// TeacherConfig makes a second, larger depth model (the teacher, run
// offline) label the frames that have no depth ground truth: its depth
// becomes the AuxUE's target wherever it can vouch for it, and nothing
// elsewhere (the paper keeps pixels without ground truth, the sky above
// all, out of the loss: that is what DIDO learns to mark).
type TeacherConfig struct {
	// Model and Spec are the teacher and its IO spec (Spec "" = the
	// model's path with .yaml). Model "" disables the teacher.
	Model, Spec string
	// MaxDepth is the teacher's range in metres: a pixel it puts at or
	// beyond it gets no target [the student's AuxTrainConfig.MaxDepth].
	MaxDepth float64
	// Mask is a PNG of the frames' size: its zero pixels never get a
	// teacher target (the ego vehicle's bonnet, a mount, a wiper).
	Mask string
	// AuxUE and AuxUESpec are the teacher's own AuxUE (Spec "" = beside
	// it): its epistemic K/S is then the teacher's confidence read-out u,
	// in place of a native confidence output. A teacher trained on LiDAR
	// never saw the sky and puts it at some finite depth within its range;
	// its AuxUE's DIDO marks exactly those pixels.
	AuxUE, AuxUESpec string
	// MaxUncertainty drops the pixels whose confidence read-out u
	// (infer.ConfidenceSpec.Readout, or the teacher AuxUE's K/S) exceeds it
	// (0: no bound); the teacher needs a confidence output or an AuxUE.
	// TeacherBoundAuto (the command's default) is, for a teacher AuxUE
	// and no ConfidenceDrop, the K/S of half the evidence its DIDO head
	// holds on pixels like its training data (teacherAutoBound), else 0.
	MaxUncertainty float64
	// ConfidenceDrop drops, per frame, that fraction of the teacher's
	// pixels with the largest u (a per-image percentile, which every
	// convention supports, rankings included) [0: none].
	ConfidenceDrop float64
	// BlockShare is the share of a block's pixels the teacher must vouch
	// for before the block of the AuxUE's grid gets its targets: a block's
	// error is the mean over whatever pixels of it have a target, so a few
	// scattered pixels the teacher accepted (in the sky, where a LiDAR-
	// trained teacher's AuxUE is uncertain but not everywhere above a
	// bound) would put the whole block into the loss as known. The pixels
	// asked are those without real ground truth and inside the mask; the
	// dropped ones count as LowConfidence [0: per pixel, no block rule;
	// the command's default 1, every pixel asked: measured against 0.5 in
	// docs/training.md#teacher-targets-the-sky-rule].
	BlockShare float64
	// Batch is how many frames one run of the teacher takes (a model
	// with a fixed batch dimension is run from a copy made dynamic,
	// pkg/onnx.DynamicBatch; its sha256 stays the file's) [0 or 1: one
	// frame a run].
	Batch int
}

// TeacherBoundAuto as TeacherConfig.MaxUncertainty derives the bound from
// the teacher's AuxUE (teacherAutoBound).
const TeacherBoundAuto = -1

// teacherAutoBound is the K/S of half the equilibrium evidence of a DIDO
// head with K bins and KL weight lambda. On pixels like its training data
// the loss of paper eq. 4 is stationary at alpha_j = 1 + p_j/lambda, so
// the Dirichlet strength is S* = K + 1/lambda and K/S* = K/(K + 1/lambda)
// (docs/training.md: why the evidence is flat); on pixels it never saw,
// S tends to the prior's K and K/S to 1. A pixel keeps its teacher target
// while the teacher's AuxUE holds at least half that evidence there:
// K/S <= K/(K + 1/(2 lambda)) (0.390 for K 32, lambda 0.01, whose
// equilibrium is 0.242).
func teacherAutoBound(k int, lambda float64) float64 {
	return float64(k) / (float64(k) + 1/(2*lambda))
}

// maxTeacherBatch bounds TeacherConfig.Batch (the batch's input and
// output buffers grow with it).
const maxTeacherBatch = 64

// Enabled reports whether a teacher is configured.
func (t TeacherConfig) Enabled() bool { return t.Model != "" }

// check validates the values that need no file.
func (t TeacherConfig) check() error {
	switch {
	case t.MaxDepth < 0 || math.IsNaN(t.MaxDepth) || math.IsInf(t.MaxDepth, 0):
		return fmt.Errorf("--teacher-max-depth %g: want a positive range in metres (0: the student's --max-depth)", t.MaxDepth)
	case (t.MaxUncertainty < 0 && t.MaxUncertainty != TeacherBoundAuto) || math.IsNaN(t.MaxUncertainty) || math.IsInf(t.MaxUncertainty, 0):
		return fmt.Errorf("--teacher-max-uncertainty %g: want 0 (off), -1 (auto: from --teacher-auxue) or a positive bound", t.MaxUncertainty)
	case !(t.ConfidenceDrop >= 0 && t.ConfidenceDrop < 1):
		return fmt.Errorf("--teacher-confidence-drop %g: want a fraction in [0, 1)", t.ConfidenceDrop)
	case t.Batch < 0 || t.Batch > maxTeacherBatch:
		return fmt.Errorf("--teacher-batch %d: want 1 to %d frames a run", t.Batch, maxTeacherBatch)
	case !(t.BlockShare >= 0 && t.BlockShare <= 1):
		return fmt.Errorf("--teacher-block-share %g: want a fraction in [0, 1] (0: per pixel)", t.BlockShare)
	case !t.Enabled() && (t.Spec != "" || t.Mask != "" || t.MaxDepth != 0 || (t.MaxUncertainty != 0 && t.MaxUncertainty != TeacherBoundAuto) || t.ConfidenceDrop != 0 || t.AuxUE != ""):
		return errors.New("--teacher-spec, --teacher-auxue, --teacher-max-depth, --teacher-mask and the confidence bounds need --teacher")
	}
	return nil
}

// LabelCounts counts the target pixels of frames labelled with a teacher.
type LabelCounts struct {
	// Real pixels carry the data set's own ground truth (it wins over
	// the teacher per pixel); Teacher pixels the teacher's depth.
	Real    int64 `json:"real_pixels"`
	Teacher int64 `json:"teacher_pixels"`
	// Pixels the teacher could not vouch for and that stayed without a
	// target: at or beyond its range (or not a positive depth), zero in
	// the user's mask, and below its confidence level.
	BeyondRange   int64 `json:"beyond_range_pixels"`
	Masked        int64 `json:"masked_pixels"`
	LowConfidence int64 `json:"low_confidence_pixels"`
	// FramesWithGT counts the frames with any real ground truth.
	FramesWithGT int `json:"frames_with_ground_truth"`
}

func (c *LabelCounts) add(o LabelCounts) {
	c.Real += o.Real
	c.Teacher += o.Teacher
	c.BeyondRange += o.BeyondRange
	c.Masked += o.Masked
	c.LowConfidence += o.LowConfidence
	c.FramesWithGT += o.FramesWithGT
}

// labelFields is how many uint32 a training record spends on its frame's
// LabelCounts (recordLayout.Labels).
const labelFields = 6

func (c LabelCounts) encode(dst []uint32) {
	dst[0], dst[1], dst[2], dst[3], dst[4] = uint32(c.Real), uint32(c.Teacher), uint32(c.BeyondRange), uint32(c.Masked), uint32(c.LowConfidence)
	dst[5] = uint32(c.FramesWithGT)
}

func decodeLabels(src []uint32) LabelCounts {
	return LabelCounts{Real: int64(src[0]), Teacher: int64(src[1]), BeyondRange: int64(src[2]), Masked: int64(src[3]),
		LowConfidence: int64(src[4]), FramesWithGT: int(src[5])}
}

// TeacherReport is what a run with a teacher reports (AuxStats.Teacher,
// the summary's teacher).
type TeacherReport struct {
	Model          string  `json:"model"`
	SHA256         string  `json:"sha256"`
	Provider       string  `json:"provider"`
	Relative       bool    `json:"relative"`
	MaxDepth       float64 `json:"max_depth"`
	Mask           string  `json:"mask,omitempty"`
	MaxUncertainty float64 `json:"max_uncertainty,omitempty"`
	ConfidenceDrop float64 `json:"confidence_drop,omitempty"`
	BlockShare     float64 `json:"block_share"`
	// IgnoredGT: the frames' own ground truth was left out.
	IgnoredGT bool `json:"ignored_ground_truth"`
	// Train and Val count the target pixels of the training and
	// validation frames.
	Train LabelCounts `json:"train"`
	Val   LabelCounts `json:"val"`
	// CacheDir holds the teacher's read-outs; of the frames labelled the
	// teacher ran on FramesRun, FramesReused came from an earlier run.
	CacheDir     string  `json:"cache_dir"`
	FramesRun    int     `json:"frames_run"`
	FramesReused int     `json:"frames_reused"`
	Seconds      float64 `json:"seconds"` // the teacher's ONNX Runtime time
}

// teacher runs the teacher model and turns its read-out into targets.
type teacher struct {
	cfg      TeacherConfig
	models   *infer.Models
	spec     infer.IOSpec
	sha      string
	relative bool
	// studentRelative: the student's own depth cannot align a relative
	// teacher.
	studentRelative bool
	mask            []bool // nil: no mask
	maskW, maskH    int
	maskSHA         string
	auxSHA          string // the teacher's AuxUE ("" without)
	copies          string // directory of the dynamic-batch copies ("" none)
	rep             *TeacherReport
	// views and staged are the batch's frames (prefill).
	views  []*infer.Models
	staged []*infer.Staged

	depth, conf []float32 // the frame's teacher read-out (cache or model)
	target      []float32
	unc         []float32 // scratch of the per-frame percentile
	asked       []int32   // scratch of blockGate: pixels asked, vouched for per block
}

// openTeacher loads the teacher (and its mask) for a student of maxDepth.
func openTeacher(ctx context.Context, cfg TeacherConfig, inference onnxrt.Config, studentRelative bool, maxDepth float64, log *slog.Logger) (*teacher, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Spec == "" {
		cfg.Spec = strings.TrimSuffix(cfg.Model, filepath.Ext(cfg.Model)) + ".yaml"
	}
	if cfg.MaxDepth == 0 {
		cfg.MaxDepth = maxDepth
	}
	spec, err := ReadSpec(cfg.Spec, infer.KindDepth)
	if err != nil {
		return nil, fmt.Errorf("teacher: %w", err)
	}
	if cfg.MaxUncertainty == TeacherBoundAuto && cfg.AuxUE == "" {
		cfg.MaxUncertainty = 0
	}
	if (cfg.MaxUncertainty > 0 || cfg.ConfidenceDrop > 0) && spec.Confidence == nil && cfg.AuxUE == "" {
		return nil, fmt.Errorf("teacher: --teacher-max-uncertainty and --teacher-confidence-drop need a confidence output or --teacher-auxue, and the teacher's io spec %q declares no confidence (confidence: {name: ..., meaning: ...})", cfg.Spec)
	}
	t := &teacher{cfg: cfg, spec: spec, relative: spec.Relative(), studentRelative: studentRelative}
	mc := infer.ModelsConfig{Depth: cfg.Model, DepthSpec: spec, Inference: inference, DepthSpecFile: cfg.Spec}
	if cfg.AuxUE != "" {
		if cfg.AuxUESpec == "" {
			cfg.AuxUESpec = strings.TrimSuffix(cfg.AuxUE, filepath.Ext(cfg.AuxUE)) + ".yaml"
		}
		if mc.AuxUESpec, err = ReadSpec(cfg.AuxUESpec, infer.KindAuxUE); err != nil {
			return nil, fmt.Errorf("teacher: --teacher-auxue: %w", err)
		}
		mc.AuxUE, mc.AuxUESpecFile = cfg.AuxUE, cfg.AuxUESpec
		if cfg.MaxUncertainty == TeacherBoundAuto {
			cfg.MaxUncertainty = 0
			if a := mc.AuxUESpec.AuxUE; a != nil && a.K > 0 && a.Lambda > 0 && cfg.ConfidenceDrop == 0 {
				cfg.MaxUncertainty = teacherAutoBound(a.K, a.Lambda)
				log.Info("teacher: a pixel gets a target where its AuxUE holds half the evidence of its training pixels or more",
					"max_uncertainty", cfg.MaxUncertainty, "k", a.K, "lambda", a.Lambda)
			}
		}
		t.cfg = cfg
	}
	if cfg.Mask != "" {
		if err := t.readMask(cfg.Mask); err != nil {
			return nil, err
		}
	}
	// The cache and the summary name the files as given, whatever runs.
	if t.sha, err = manifest.FileSHA256(cfg.Model); err != nil {
		return nil, fmt.Errorf("teacher: %w", err)
	}
	if cfg.AuxUE != "" {
		if t.auxSHA, err = manifest.FileSHA256(cfg.AuxUE); err != nil {
			return nil, fmt.Errorf("teacher: --teacher-auxue: %w", err)
		}
	}
	if cfg.Batch > 1 {
		if err := t.dynamicCopies(&mc); err != nil {
			return nil, err
		}
		mc.BatchSize = cfg.Batch
	}
	t.models, err = infer.OpenModels(ctx, mc, log)
	if err != nil {
		t.removeCopies()
		return nil, fmt.Errorf("teacher: %w", err)
	}
	t.rep = &TeacherReport{Model: cfg.Model, SHA256: t.sha, Provider: t.models.DepthSession().Provider(), Relative: t.relative,
		MaxDepth: cfg.MaxDepth, Mask: cfg.Mask, MaxUncertainty: cfg.MaxUncertainty, ConfidenceDrop: cfg.ConfidenceDrop, BlockShare: cfg.BlockShare}
	return t, nil
}

func (t *teacher) Close() error {
	err := t.models.Close()
	t.removeCopies()
	return err
}

// dynamicCopies points mc at copies of the teacher (and its AuxUE) whose
// batch dimension is symbolic, in a temporary directory, for the models
// that have a fixed one.
func (t *teacher) dynamicCopies(mc *infer.ModelsConfig) error {
	for _, path := range []*string{&mc.Depth, &mc.AuxUE} {
		if *path == "" {
			continue
		}
		m, err := onnx.ReadFile(*path)
		if err != nil {
			return fmt.Errorf("teacher: %w", err)
		}
		edit, err := onnx.DynamicBatch(m, "")
		if err != nil {
			return fmt.Errorf("teacher: --teacher-batch: %q: %w", *path, err)
		}
		if edit.Declarations == 0 && len(edit.Broadcasts) == 0 {
			continue
		}
		if t.copies == "" {
			if t.copies, err = os.MkdirTemp("", "didoedge-teacher-batch-"); err != nil {
				return fmt.Errorf("teacher: %w", err)
			}
		}
		out := filepath.Join(t.copies, filepath.Base(*path))
		if err := onnx.WriteFile(out, m); err != nil {
			t.removeCopies()
			return fmt.Errorf("teacher: %w", err)
		}
		if path == &mc.Depth {
			// The teacher's AuxUE was trained on the file, which the copy
			// is (batch dimension aside): pair it with the copy.
			if a := mc.AuxUESpec.AuxUE; a != nil && a.DepthModelSHA256 == t.sha {
				sum, err := manifest.FileSHA256(out)
				if err != nil {
					t.removeCopies()
					return fmt.Errorf("teacher: %w", err)
				}
				info := *a
				info.DepthModelSHA256 = sum
				mc.AuxUESpec.AuxUE = &info
			}
		}
		*path = out
	}
	return nil
}

func (t *teacher) removeCopies() {
	if t.copies != "" {
		os.RemoveAll(t.copies)
		t.copies = ""
	}
}

// maxMaskPixels bounds a mask's size before it is decoded.
const maxMaskPixels = 1 << 26

// readMask reads the user's mask: a PNG whose zero pixels (any channel
// layout: a pixel is zero when all its channels are) get no target.
func (t *teacher) readMask(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--teacher-mask: %w", err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		return fmt.Errorf("--teacher-mask %q: %w", path, err)
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width*cfg.Height > maxMaskPixels {
		return fmt.Errorf("--teacher-mask %q: %dx%d pixels, want 1 to %d", path, cfg.Width, cfg.Height, maxMaskPixels)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("--teacher-mask %q: %w", path, err)
	}
	img, err := png.Decode(f)
	if err != nil {
		return fmt.Errorf("--teacher-mask %q: %w", path, err)
	}
	b := img.Bounds()
	t.maskW, t.maskH = b.Dx(), b.Dy()
	t.mask = make([]bool, t.maskW*t.maskH)
	for y := 0; y < t.maskH; y++ {
		for x := 0; x < t.maskW; x++ {
			r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
			t.mask[y*t.maskW+x] = r|g|bl != 0
		}
	}
	sum := sha256.New()
	for _, v := range t.mask {
		if v {
			sum.Write([]byte{1})
		} else {
			sum.Write([]byte{0})
		}
	}
	t.maskSHA = hex.EncodeToString(sum.Sum(nil))
	return nil
}

// keyPart is what the student's cache key holds of the teacher: a change
// of the teacher (its sha256), of its spec or of the labelling rules
// labels other targets.
func (t *teacher) keyPart() map[string]any {
	return map[string]any{"sha256": t.sha, "spec": t.spec, "auxue_sha256": t.auxSHA, "max_depth": t.cfg.MaxDepth, "mask_sha256": t.maskSHA,
		"max_uncertainty": t.cfg.MaxUncertainty, "confidence_drop": t.cfg.ConfidenceDrop, "block_share": t.cfg.BlockShare}
}
