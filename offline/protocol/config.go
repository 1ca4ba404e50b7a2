package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/dataset/corrupt"
)

// Config is one evaluation run (configs/eval-*.yaml). Unknown keys are errors.
type Config struct {
	// Name labels the report.
	Name string `yaml:"name"`
	// Seeds: every number is the mean and spread over these (the paper: 3).
	Seeds []int `yaml:"seeds"`
	// SparsStep is the sparsification step (paper: 5%).
	SparsStep float64  `yaml:"sparsification_step"`
	Data      Data     `yaml:"data"`
	Main      Main     `yaml:"main"`
	AuxUE     AuxUE    `yaml:"auxue"`
	Baselines Baseline `yaml:"baselines"`
	// Corruptions applied to the test frames ("all" = the 18 of dataset/corrupt)
	// at Severities (1..5).
	Corruptions []string `yaml:"corruptions"`
	Severities  []int    `yaml:"severities"`
	Ablations   Ablation `yaml:"ablations"`
	Tabular     Tabular  `yaml:"tabular"`
}

// Data sizes the simulated frames. Training frames come from Drives drives of
// world seed TrainSeed (as `didoedge train depth` draws them); test frames from
// TestDrives drives of TestSeed, a different seed, so no test scene was seen.
type Data struct {
	Width          int   `yaml:"width"`
	Height         int   `yaml:"height"`
	TrainSeed      int64 `yaml:"train_seed"`
	Drives         int   `yaml:"drives"`
	FramesPerDrive int   `yaml:"frames_per_drive"`
	TestSeed       int64 `yaml:"test_seed"`
	TestDrives     int   `yaml:"test_drives"`
	TestFrames     int   `yaml:"test_frames"`
	IndoorSeed     int64 `yaml:"indoor_seed"`
	IndoorFrames   int   `yaml:"indoor_frames"`
}

// Main is the frozen main depth model. Reference, when the file exists, is a
// checkpoint of `didoedge train depth` (offline/depthnet, width 1, 80 m); it
// needs Data.Height == 192. Otherwise a network is trained with the budget
// below (also the budget of every ensemble member).
type Main struct {
	Reference string  `yaml:"reference"`
	Steps     int     `yaml:"steps"`
	Batch     int     `yaml:"batch"`
	CropWidth int     `yaml:"crop_width"`
	LR        float64 `yaml:"lr"`
	Seed      int64   `yaml:"seed"`
}

// AuxUE trains the generalized AuxUE variants on the frozen main model.
type AuxUE struct {
	Frames       int     `yaml:"frames"`
	Epochs       int     `yaml:"epochs"`
	Batch        int     `yaml:"batch"`
	LR           float64 `yaml:"lr"`
	EndLR        float64 `yaml:"end_lr"`
	EncoderWidth int     `yaml:"encoder_width"`
	Hidden       int     `yaml:"hidden"`
	K            int     `yaml:"k"`
	Lambda       float64 `yaml:"lambda"`
	// UnlabeledKL keeps the DIDO regularizer on pixels without ground truth
	// at this weight (auxue.Config.UnlabeledKL; 0: labeled pixels only).
	UnlabeledKL float64 `yaml:"unlabeled_kl"`
	// GlobalContextBands > 0 gives every DIDO head the frame's channel means
	// over that many horizontal bands (auxue.Config.GlobalContextBands);
	// Outliers replaces that fraction of the batch items by layout outliers
	// without ground truth (flip, tiles; depthnet.MakeOutlier). 0 and 0: the
	// local-feature AuxUE. The reference recipe is 4 and 0.25.
	GlobalContextBands int     `yaml:"global_context_bands"`
	Outliers           float64 `yaml:"outliers"`
	// Inputs of the AuxUE: "rgbd" (block means of the image and predicted
	// depth), "rgbd+row" (plus the row coordinate, as the exported runtime
	// AuxUE), "rgbd+decoder" (plus the main model's last decoder features,
	// the paper's "features of the main model") or "rgbd+row+decoder".
	Inputs string `yaml:"inputs"`
	// Factor is the AuxUE's resolution divisor: it reads and predicts on
	// Factor x Factor blocks (2, the default, or 4 as the exported runtime
	// AuxUE at 640x192; the +decoder inputs need 2).
	Factor      int      `yaml:"factor"`
	Heads       []string `yaml:"heads"`    // laplace, gaussian, ggau, nig
	Encoders    []string `yaml:"encoders"` // separate, shared
	Categorical bool     `yaml:"categorical"`
}

// Baseline configures the methods that modify or probe the main model.
type Baseline struct {
	// EnsembleMembers depth networks per seed (0 = no ensemble).
	EnsembleMembers int `yaml:"ensemble_members"`
	// InjectSamples forward passes with dropout injected at the bottleneck
	// (0 = off) with probability InjectP.
	InjectSamples int     `yaml:"inject_samples"`
	InjectP       float64 `yaml:"inject_p"`
	// Gradient enables the training-free gradient score.
	Gradient bool `yaml:"gradient"`
}

// Ablation lists the K and lambda values of the DIDO ablation (supp. D).
type Ablation struct {
	K      []int     `yaml:"k"`
	Lambda []float64 `yaml:"lambda"`
}

// Tabular is the synthetic tabular example of supplementary A.2.
type Tabular struct {
	Enabled    bool `yaml:"enabled"`
	Rows       int  `yaml:"rows"`
	MainEpochs int  `yaml:"main_epochs"`
	AuxEpochs  int  `yaml:"aux_epochs"`
}

// LoadConfig reads and checks a YAML config; every error names the file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval config: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig decodes a YAML config (name is used in errors).
func ParseConfig(data []byte, name string) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("eval config %q: empty file", name)
		}
		return nil, fmt.Errorf("eval config %q: %w", name, err)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("eval config %q: %w", name, err)
	}
	return &c, nil
}

// Heads and encoder names accepted by the config.
var (
	headNames    = []string{"laplace", "gaussian", "ggau", "nig"}
	encoderNames = []string{"separate", "shared"}
)

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (c *Config) check() error {
	if len(c.Seeds) == 0 {
		return fmt.Errorf("key seeds: at least one seed is needed")
	}
	if !(c.SparsStep >= 0 && c.SparsStep < 0.5) {
		return fmt.Errorf("key sparsification_step: %v outside [0, 0.5)", c.SparsStep)
	}
	d := c.Data
	if d.Height < 32 || d.Height%32 != 0 {
		return fmt.Errorf("key data.height: %d must be a positive multiple of 32", d.Height)
	}
	if d.Width < 32 || d.Width%32 != 0 || d.Width > 4096 || d.Height > 4096 {
		return fmt.Errorf("key data.width: %d must be a multiple of 32 up to 4096", d.Width)
	}
	pos := map[string]int{"data.drives": d.Drives, "data.frames_per_drive": d.FramesPerDrive,
		"data.test_drives": d.TestDrives, "data.test_frames": d.TestFrames, "data.indoor_frames": d.IndoorFrames,
		"auxue.frames": c.AuxUE.Frames, "auxue.epochs": c.AuxUE.Epochs, "auxue.batch": c.AuxUE.Batch,
		"auxue.encoder_width": c.AuxUE.EncoderWidth, "auxue.hidden": c.AuxUE.Hidden, "auxue.k": c.AuxUE.K}
	for k, v := range pos {
		if v < 1 || v > 1<<20 {
			return fmt.Errorf("key %s: %d must be in [1, 2^20]", k, v)
		}
	}
	if d.TrainSeed == d.TestSeed {
		return fmt.Errorf("key data.test_seed: must differ from data.train_seed (held-out scenes)")
	}
	if c.AuxUE.Frames < c.AuxUE.Batch {
		return fmt.Errorf("key auxue.frames: %d is smaller than auxue.batch %d", c.AuxUE.Frames, c.AuxUE.Batch)
	}
	if !(c.AuxUE.LR > 0 && c.AuxUE.LR < 10) || !(c.AuxUE.EndLR >= 0) || !(c.AuxUE.Lambda >= 0 && c.AuxUE.Lambda <= 10) {
		return fmt.Errorf("key auxue.lr/end_lr/lambda: need lr > 0, end_lr >= 0, lambda >= 0")
	}
	in, err := parseAuxInputs(c.AuxUE.Inputs)
	if err != nil {
		return fmt.Errorf("key auxue.inputs: %w", err)
	}
	if c.AuxUE.Factor == 0 {
		c.AuxUE.Factor = 2
	}
	if f := c.AuxUE.Factor; f != 2 && f != 4 {
		return fmt.Errorf("key auxue.factor: %d (want 2 or 4)", f)
	} else if f != 2 && in.decoder {
		return fmt.Errorf("key auxue.factor: %d, but inputs %q need 2 (the decoder features are at half resolution)", f, c.AuxUE.Inputs)
	}
	rows := d.Height / c.AuxUE.Factor
	if c.AuxUE.GlobalContextBands < 0 || (c.AuxUE.GlobalContextBands > 0 && rows%c.AuxUE.GlobalContextBands != 0) {
		return fmt.Errorf("key auxue.global_context_bands: %d must be >= 0 and divide the AuxUE's %d rows", c.AuxUE.GlobalContextBands, rows)
	}
	if !(c.AuxUE.Outliers >= 0 && c.AuxUE.Outliers < 1) {
		return fmt.Errorf("key auxue.outliers: %v outside [0, 1)", c.AuxUE.Outliers)
	}
	if !(c.AuxUE.UnlabeledKL >= 0 && c.AuxUE.UnlabeledKL <= 100) {
		return fmt.Errorf("key auxue.unlabeled_kl: %v outside [0, 100]", c.AuxUE.UnlabeledKL)
	}
	if len(c.AuxUE.Heads) == 0 || len(c.AuxUE.Encoders) == 0 {
		return fmt.Errorf("key auxue.heads/encoders: at least one each")
	}
	for _, h := range c.AuxUE.Heads {
		if !contains(headNames, h) {
			return fmt.Errorf("key auxue.heads: %q unknown (want one of %v)", h, headNames)
		}
	}
	if !contains(c.AuxUE.Heads, "laplace") {
		return fmt.Errorf("key auxue.heads: laplace is required (DIDO rides on the Laplace AuxUE as in the paper)")
	}
	for _, e := range c.AuxUE.Encoders {
		if !contains(encoderNames, e) {
			return fmt.Errorf("key auxue.encoders: %q unknown (want one of %v)", e, encoderNames)
		}
	}
	m := c.Main
	if m.Reference == "" || !fileExists(m.Reference) {
		if m.Steps < 1 || m.Batch < 1 || m.CropWidth < 16 || m.CropWidth%16 != 0 || m.CropWidth > d.Width || !(m.LR > 0) {
			return fmt.Errorf("key main: steps, batch >= 1, crop_width a multiple of 16 up to data.width, lr > 0 are needed to train the main model")
		}
	} else if d.Height != 192 {
		return fmt.Errorf("key main.reference: the reference depth model needs data.height 192, not %d", d.Height)
	}
	b := c.Baselines
	if b.EnsembleMembers < 0 || b.EnsembleMembers == 1 || b.EnsembleMembers > 16 {
		return fmt.Errorf("key baselines.ensemble_members: %d (want 0 or 2..16)", b.EnsembleMembers)
	}
	if b.InjectSamples < 0 || b.InjectSamples == 1 || b.InjectSamples > 64 || (b.InjectSamples > 0 && !(b.InjectP > 0 && b.InjectP < 1)) {
		return fmt.Errorf("key baselines.inject_samples/inject_p: samples 0 or 2..64 and p in (0, 1)")
	}
	if len(c.Corruptions) == 1 && c.Corruptions[0] == "all" {
		c.Corruptions = corrupt.Names()
	}
	for _, name := range c.Corruptions {
		for _, s := range c.Severities {
			if err := corrupt.Validate(name, s); err != nil {
				return fmt.Errorf("key corruptions/severities: %w", err)
			}
		}
	}
	if len(c.Corruptions) > 0 && len(c.Severities) == 0 {
		return fmt.Errorf("key severities: corruptions need at least one severity")
	}
	for _, k := range c.Ablations.K {
		if k < 2 || k > 256 {
			return fmt.Errorf("key ablations.k: %d outside [2, 256]", k)
		}
	}
	for _, l := range c.Ablations.Lambda {
		if !(l >= 0 && l <= 10) {
			return fmt.Errorf("key ablations.lambda: %v outside [0, 10]", l)
		}
	}
	if t := c.Tabular; t.Enabled && (t.Rows < 100 || t.Rows > 1<<20 || t.MainEpochs < 1 || t.AuxEpochs < 1) {
		return fmt.Errorf("key tabular: rows >= 100, main_epochs and aux_epochs >= 1")
	}
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// hashOf is a short stable digest of v's JSON form, used in cache names.
func hashOf(v any) string {
	b, _ := json.Marshal(v)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:6])
}
