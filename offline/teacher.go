package offline

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/manifest"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/apps/export"
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

// teacherCache holds the teacher's read-out of each frame of one frame
// source, keyed by the teacher's sha256, its spec and the frames: one file
// per frame (the teacher's depth read-out at the frame's size, and its
// confidence read-out when it has one), written whole (temporary file and
// rename), so an interrupted run keeps every frame it finished.
type teacherCache struct {
	dir  string
	temp bool
}

func openTeacherCache(root string, key any) (*teacherCache, error) {
	kj, err := json.Marshal(key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(kj)
	c := &teacherCache{}
	if root == "" {
		if c.dir, err = os.MkdirTemp("", "didoedge-teacher-cache-"); err != nil {
			return nil, err
		}
		c.temp = true
	} else {
		c.dir = filepath.Join(root, "teacher-"+hex.EncodeToString(sum[:8]))
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			return nil, fmt.Errorf("teacher cache: %w", err)
		}
	}
	metaPath := filepath.Join(c.dir, "meta.json")
	if b, err := os.ReadFile(metaPath); err == nil {
		var have struct {
			Key json.RawMessage `json:"key"`
		}
		if err := json.Unmarshal(b, &have); err != nil || !jsonEqual(have.Key, kj) {
			return nil, fmt.Errorf("teacher cache %q: meta.json does not match this run's key (delete the directory to rebuild it)", c.dir)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		b, _ := json.MarshalIndent(map[string]any{"key": json.RawMessage(kj), "created": time.Now().UTC().Format(time.RFC3339)}, "", "  ")
		if err := os.WriteFile(metaPath, append(b, '\n'), 0o644); err != nil {
			return nil, fmt.Errorf("teacher cache: %w", err)
		}
	} else {
		return nil, fmt.Errorf("teacher cache: %w", err)
	}
	return c, nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func (c *teacherCache) path(i int) string { return filepath.Join(c.dir, fmt.Sprintf("%07d.bin", i)) }

// teacherMagic starts a teacher cache file: "DTC1", width, height, and
// whether a confidence map follows the depth map (float32 little endian).
const teacherMagic = "DTC1"

// load reads frame i of size w x h into depth and conf (conf nil: the
// teacher has none); ok false when the cache does not hold it. The file's
// size is checked against w x h before anything is read into memory.
func (c *teacherCache) load(i, w, h int, depth, conf []float32) (bool, error) {
	f, err := os.Open(c.path(i))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("teacher cache: %w", err)
	}
	defer f.Close()
	maps := 1
	if conf != nil {
		maps = 2
	}
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("teacher cache: %w", err)
	}
	if want := int64(16 + 4*maps*w*h); st.Size() != want {
		return false, fmt.Errorf("teacher cache %q: %d bytes, a %dx%d frame with %d map(s) takes %d (delete the directory to rebuild it)", c.path(i), st.Size(), w, h, maps, want)
	}
	buf := make([]byte, st.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return false, fmt.Errorf("teacher cache %q: %w", c.path(i), err)
	}
	if string(buf[:4]) != teacherMagic || int(binary.LittleEndian.Uint32(buf[4:])) != w || int(binary.LittleEndian.Uint32(buf[8:])) != h ||
		int(binary.LittleEndian.Uint32(buf[12:])) != maps-1 {
		return false, fmt.Errorf("teacher cache %q: header does not describe a %dx%d frame with %d map(s)", c.path(i), w, h, maps)
	}
	o := 16
	for _, m := range [][]float32{depth, conf}[:maps] {
		for k := range m[:w*h] {
			m[k] = math.Float32frombits(binary.LittleEndian.Uint32(buf[o:]))
			o += 4
		}
	}
	return true, nil
}

// store writes frame i.
func (c *teacherCache) store(i, w, h int, depth, conf []float32) error {
	maps := 1
	if conf != nil {
		maps = 2
	}
	buf := make([]byte, 16+4*maps*w*h)
	copy(buf, teacherMagic)
	binary.LittleEndian.PutUint32(buf[4:], uint32(w))
	binary.LittleEndian.PutUint32(buf[8:], uint32(h))
	binary.LittleEndian.PutUint32(buf[12:], uint32(maps-1))
	o := 16
	for _, m := range [][]float32{depth, conf}[:maps] {
		for _, v := range m[:w*h] {
			binary.LittleEndian.PutUint32(buf[o:], math.Float32bits(v))
			o += 4
		}
	}
	tmp := c.path(i) + ".tmp"
	if err := os.WriteFile(tmp, buf, 0o644); err != nil {
		return fmt.Errorf("teacher cache: %w", err)
	}
	if err := os.Rename(tmp, c.path(i)); err != nil {
		return fmt.Errorf("teacher cache: %w", err)
	}
	return nil
}

func (c *teacherCache) Close() error {
	if c.temp {
		return os.RemoveAll(c.dir)
	}
	return nil
}

// readout returns the teacher's read-out of frame i of s (from the cache,
// or running the teacher and caching it).
func (t *teacher) readout(ctx context.Context, c *teacherCache, i int, s *dataset.Sample, reused *int) error {
	n := s.Width * s.Height
	t.depth = slices.Grow(t.depth[:0], n)[:n]
	t.conf = nil
	if t.hasConfidence() {
		t.conf = slices.Grow(t.conf[:0], n)[:n]
	}
	ok, err := c.load(i, s.Width, s.Height, t.depth, t.conf)
	if err != nil {
		return err
	}
	if ok {
		*reused++
		return nil
	}
	t0 := time.Now()
	t.models.FrameFocal(s.Intrinsics.Fx, s.Width)
	if t.auxSHA != "" {
		maps, err := t.models.Infer(ctx, s.RGB, s.Width, s.Height)
		if err != nil {
			return fmt.Errorf("teacher: frame %s: %w", s.Name, err)
		}
		if len(maps.Depth) != n || len(maps.Epistemic) != n {
			return fmt.Errorf("teacher: frame %s: maps of %d and %d pixels for a %dx%d frame", s.Name, len(maps.Depth), len(maps.Epistemic), s.Width, s.Height)
		}
		copy(t.depth, maps.Depth)
		copy(t.conf, maps.Epistemic)
	} else {
		dp, err := t.models.RunDepth(ctx, s.RGB, s.Width, s.Height)
		if err != nil {
			return fmt.Errorf("teacher: frame %s: %w", s.Name, err)
		}
		copy(t.depth, dp.Frame)
		if t.conf != nil {
			if len(dp.FrameConfidence) != n {
				return fmt.Errorf("teacher: frame %s: no confidence read-out at the frame's size", s.Name)
			}
			copy(t.conf, dp.FrameConfidence)
		}
	}
	t.rep.Seconds += time.Since(t0).Seconds()
	return c.store(i, s.Width, s.Height, t.depth, t.conf)
}

// batch is how many frames one teacher run takes.
func (t *teacher) batch() int {
	if t.auxSHA != "" {
		return t.models.MaxBatch()
	}
	return t.models.DepthSession().MaxBatch()
}

// prefill runs the teacher in batches on every frame of src its cache
// lacks and caches the read-outs; label then finds them there. fresh
// marks the frames it ran (they are not counted as reused).
func (r *teacherRun) prefill(ctx context.Context, src frameSource) error {
	t := r.t
	b := t.batch()
	if b < 2 {
		return nil // one frame a run, in readout
	}
	for len(t.views) < b {
		v := t.models
		if len(t.views) > 0 {
			var err error
			if v, err = t.models.Share(); err != nil {
				return fmt.Errorf("teacher: %w", err)
			}
		}
		t.views, t.staged = append(t.views, v), append(t.staged, t.models.NewStaged())
	}
	r.fresh = make([]bool, src.Len())
	type pending struct {
		i, w, h int
		name    string
	}
	var batch []pending
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		t0 := time.Now()
		views, staged := t.views[:len(batch)], t.staged[:len(batch)]
		var err error
		if t.auxSHA != "" {
			var st infer.StageTimes
			err = t.models.InferBatch(ctx, views, staged, &st)
		} else {
			err = t.models.DepthBatch(ctx, views, staged)
		}
		if err != nil {
			return fmt.Errorf("teacher: a batch of %d frames from %s: %w", len(batch), batch[0].name, err)
		}
		t.rep.Seconds += time.Since(t0).Seconds()
		for k, p := range batch {
			var depth, conf []float32
			if t.auxSHA != "" {
				m, _, err := views[k].Result()
				if err != nil {
					return fmt.Errorf("teacher: frame %s: %w", p.name, err)
				}
				depth, conf = m.Depth, m.Epistemic
			} else {
				if depth, conf, err = views[k].DepthResult(); err != nil {
					return fmt.Errorf("teacher: frame %s: %w", p.name, err)
				}
				if t.spec.Confidence == nil {
					conf = nil
				}
			}
			n := p.w * p.h
			if len(depth) != n || (t.hasConfidence() && len(conf) != n) {
				return fmt.Errorf("teacher: frame %s: read-outs of %d and %d pixels for a %dx%d frame", p.name, len(depth), len(conf), p.w, p.h)
			}
			if err := r.cache.store(p.i, p.w, p.h, depth, conf); err != nil {
				return err
			}
			r.fresh[p.i] = true
		}
		batch = batch[:0]
		return nil
	}
	for i := 0; i < src.Len(); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := os.Stat(r.cache.path(i)); err == nil {
			continue
		}
		s, err := src.Frame(i)
		if err != nil {
			return fmt.Errorf("teacher: %w", err)
		}
		k := len(batch)
		t.views[k].FrameFocal(s.Intrinsics.Fx, s.Width)
		if err := t.models.Stage(t.staged[k], s.RGB, s.Width, s.Height); err != nil {
			return fmt.Errorf("teacher: frame %s: %w", s.Name, err)
		}
		batch = append(batch, pending{i: i, w: s.Width, h: s.Height, name: s.Name})
		if len(batch) == b {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// hasConfidence: the teacher has a confidence read-out u (its AuxUE's
// K/S, or its native confidence output).
func (t *teacher) hasConfidence() bool { return t.auxSHA != "" || t.spec.Confidence != nil }

// minAlignPixels is the fewest reference pixels a relative teacher is
// aligned on.
const minAlignPixels = 16

// label writes the frame's target into t.target (metres; 0 = no target):
// the real ground truth where the frame has it, else the teacher's depth
// where the teacher can vouch for it. A relative teacher is first aligned
// by least squares in inverse depth (metrics.AlignInverseDepth), to the
// frame's real ground truth when it has at least minAlignPixels of it,
// else to the student's metric depth (studentFrame) on the pixels the
// teacher may label; student and teacher both relative need the former.
func (t *teacher) label(s *dataset.Sample, studentFrame []float32) (LabelCounts, error) {
	var lc LabelCounts
	n := s.Width * s.Height
	if t.mask != nil && (t.maskW != s.Width || t.maskH != s.Height) {
		return lc, fmt.Errorf("--teacher-mask %q is %dx%d, frame %s is %dx%d", t.cfg.Mask, t.maskW, t.maskH, s.Name, s.Width, s.Height)
	}
	t.target = slices.Grow(t.target[:0], n)[:n]
	real := s.Sparse
	nReal := 0
	for _, y := range real {
		if y > 0 {
			nReal++
		}
	}
	if nReal > 0 {
		lc.FramesWithGT = 1
	}
	td := t.depth
	if t.relative {
		ref := real
		if nReal < minAlignPixels {
			if t.studentRelative {
				return lc, fmt.Errorf("teacher: frame %s has %d pixels of ground truth and both the teacher and the student are relative: nothing metric to align the teacher to (use a metric teacher, or frames with some ground truth)", s.Name, nReal)
			}
			// The student's metric depth on the pixels the teacher may
			// label (inside the mask) is the scale reference.
			ref = t.unc[:0]
			ref = slices.Grow(ref, n)[:n]
			for i, d := range studentFrame {
				ref[i] = 0
				if (t.mask == nil || t.mask[i]) && d > 0 && float64(d) < t.cfg.MaxDepth {
					ref[i] = d
				}
			}
			t.unc = ref
		}
		a, err := metrics.AlignInverseDepth(t.depth, ref)
		if err != nil {
			return lc, fmt.Errorf("teacher: frame %s: %w", s.Name, err)
		}
		a.Apply(t.depth, t.depth, t.cfg.MaxDepth)
	}
	// The per-frame percentile of the confidence read-out u.
	cut := math.Inf(1)
	if t.conf != nil && t.cfg.ConfidenceDrop > 0 {
		u := t.unc[:0]
		for _, v := range t.conf {
			if v == v {
				u = append(u, v)
			}
		}
		t.unc = u
		if len(u) > 0 {
			slices.Sort(u)
			// Keep the ceil((1 - p) n) most confident: u up to the
			// value of that rank.
			k := int(math.Ceil((1 - t.cfg.ConfidenceDrop) * float64(len(u))))
			cut = float64(u[min(max(k-1, 0), len(u)-1)])
		}
	}
	// With a bound, a pixel without a confidence (NaN u) is one the
	// teacher does not vouch for.
	bounded := t.conf != nil && (t.cfg.MaxUncertainty > 0 || t.cfg.ConfidenceDrop > 0)
	for i := 0; i < n; i++ {
		t.target[i] = 0
		if real != nil && real[i] > 0 {
			t.target[i] = real[i]
			lc.Real++
			continue
		}
		d := float64(td[i])
		switch {
		case t.mask != nil && !t.mask[i]:
			lc.Masked++
		case !(d > 0 && d < t.cfg.MaxDepth):
			lc.BeyondRange++
		case bounded && (!(t.conf[i] == t.conf[i]) ||
			(t.cfg.MaxUncertainty > 0 && float64(t.conf[i]) > t.cfg.MaxUncertainty) || float64(t.conf[i]) > cut):
			lc.LowConfidence++
		default:
			t.target[i] = td[i]
			lc.Teacher++
		}
	}
	return lc, nil
}

// blockGate applies TeacherConfig.BlockShare to the frame's targets: in
// every block of the AuxUE's grid (factor x factor input pixels of the
// student, geo placing the frame in its input, gw blocks a row) where the
// teacher vouched for fewer than BlockShare of the pixels it was asked
// about (no real ground truth, inside the mask), its targets are removed
// and counted as LowConfidence. Real ground truth stays.
func (t *teacher) blockGate(s *dataset.Sample, geo infer.Geometry, factor, gh, gw int, lc *LabelCounts) {
	share := t.cfg.BlockShare
	if share <= 0 {
		return
	}
	g := gh * gw
	if len(t.asked) != 2*g {
		t.asked = make([]int32, 2*g)
	}
	clear(t.asked)
	asked, vouched := t.asked[:g], t.asked[g:]
	real := s.Sparse
	cell := func(x, y int) int {
		in := geo.InputPixel(x, y)
		if in < 0 {
			return -1
		}
		return (in/geo.InW/factor)*gw + (in%geo.InW)/factor
	}
	for y := 0; y < s.Height; y++ {
		for x := 0; x < s.Width; x++ {
			i := y*s.Width + x
			if (real != nil && real[i] > 0) || (t.mask != nil && !t.mask[i]) {
				continue
			}
			c := cell(x, y)
			if c < 0 {
				continue
			}
			asked[c]++
			if t.target[i] > 0 {
				vouched[c]++
			}
		}
	}
	for y := 0; y < s.Height; y++ {
		for x := 0; x < s.Width; x++ {
			i := y*s.Width + x
			if !(t.target[i] > 0) || (real != nil && real[i] > 0) {
				continue
			}
			if c := cell(x, y); c >= 0 && float64(vouched[c]) < share*float64(asked[c]) {
				t.target[i] = 0
				lc.Teacher--
				lc.LowConfidence++
			}
		}
	}
}

// teacherRun labels the frames of one frame source.
type teacherRun struct {
	t        *teacher
	cache    *teacherCache
	ignoreGT bool
	// contract is the student AuxUE's input (its grid, for BlockShare).
	contract auxue.InputContract
	sample   dataset.Sample
	// fresh marks the frames prefill ran in this run (nil: none).
	fresh []bool
}

// Close removes a temporary cache (nil: no teacher).
func (r *teacherRun) Close() error {
	if r == nil {
		return nil
	}
	return r.cache.Close()
}

// label returns frame i of s with its targets in Sparse (the sample is
// reused by the next call) and records the counts in rec; dp is the
// student's pass on the frame.
func (r *teacherRun) label(ctx context.Context, i int, s *dataset.Sample, dp infer.DepthPass, rec *trainingRecord) (*dataset.Sample, error) {
	reused := 0
	if err := r.t.readout(ctx, r.cache, i, s, &reused); err != nil {
		return nil, err
	}
	if i < len(r.fresh) && r.fresh[i] {
		reused = 0 // prefill ran it in this run: in the cache, not reused
	}
	r.t.rep.FramesReused += reused
	r.t.rep.FramesRun += 1 - reused
	r.sample = *s
	if r.ignoreGT {
		r.sample.Sparse = nil
	}
	lc, err := r.t.label(&r.sample, dp.Frame)
	if err != nil {
		return nil, err
	}
	if r.t.cfg.BlockShare > 0 {
		gh, gw := r.contract.Grid()
		r.t.blockGate(&r.sample, dp.Geometry, r.contract.Factor, gh, gw, &lc)
	}
	r.sample.Sparse = r.t.target
	lc.encode(rec.labels)
	return &r.sample, nil
}

// exportRecording makes a recording (an MCAP file, runtime/record) a data
// set: its frames exported once in the KITTI layout (runtime/apps/export,
// what `didoedge record export FILE --kitti DIR --split train` writes)
// under root, keyed by the file's path, size and modification time, and
// reused by the next run. root "" exports into a temporary directory
// that the returned cleanup removes.
func exportRecording(ctx context.Context, path, root string, log *slog.Logger) (dir string, cleanup func(), err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", nil, fmt.Errorf("recording: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, fmt.Errorf("recording %q: %w", path, err)
	}
	cleanup = func() {}
	if root == "" {
		if root, err = os.MkdirTemp("", "didoedge-recording-"); err != nil {
			return "", nil, err
		}
		tmp := root
		cleanup = func() { os.RemoveAll(tmp) }
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s %d %d", abs, st.Size(), st.ModTime().UnixNano())))
	dir = filepath.Join(root, "recording-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, dataset.MetaFile)); err == nil {
		log.Info("train auxue: reusing the recording's export", "recording", path, "dir", dir)
		return dir, cleanup, nil
	}
	if err := os.RemoveAll(dir); err != nil { // an interrupted export
		cleanup()
		return "", nil, fmt.Errorf("recording %q: %w", path, err)
	}
	res, err := export.KITTI(ctx, path, export.Options{Dir: dir, Split: "train"})
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("recording %q: %w", path, err)
	}
	log.Info("train auxue: exported the recording", "recording", path, "dir", dir, "camera", res.Camera, "frames", res.Frames,
		"size", fmt.Sprintf("%dx%d", res.Width, res.Height), "truncated", res.Truncated)
	return dir, cleanup, nil
}
