package offline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/domain"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// DefaultDomainFrames is how many held-out training-domain frames train
// auxue fits the domain record on (160: 6x the 25 statistics of the
// default layout, so that the shrinkage covariance is well determined).
const DefaultDomainFrames = 160

// minDomainFrames is the fewest held-out frames a record is fitted on
// (5 cross-validation folds of 2; more are better: DefaultDomainFrames).
const minDomainFrames = 10

// domainDrives: the simulated pool's held-out drives the record's frames
// come from, after the training and validation drives.
const domainDrives = 8

// domainStream seeds the draw of the record's frames ("domain").
const domainStream = 0x646f6d61696e

// domainStats runs every frame of src through the models (the runtime's
// path: infer.Models, then infer.DomainFrame) and returns each frame's
// statistics for layout l.
func domainStats(ctx context.Context, models *infer.Models, l domain.Layout, src frameSource) ([][]float64, error) {
	ex, err := domain.NewExtractor(l)
	if err != nil {
		return nil, err
	}
	w, h := models.InputSize()
	out := make([][]float64, 0, src.Len())
	var tm infer.StageTimes
	err = infer.InferFrames(ctx, models, src.Len(), src.Frame, &tm, func(_ int, s *dataset.Sample, maps infer.Maps, img []uint8, err error) error {
		if err != nil {
			return fmt.Errorf("frame %s: %w", s.Name, err)
		}
		f := infer.DomainFrame(maps, img, w, h)
		x := make([]float64, l.Dim())
		if err := ex.Extract(&f, x); err != nil {
			return fmt.Errorf("frame %s: %w", s.Name, err)
		}
		out = append(out, x)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// domainSource is the held-out training-domain frames of an AuxUE
// training: the simulated pool's drives after the training and
// validation drives, or the validation split of --data (nil, "" when
// there is none).
func domainSource(d AuxData, seed int64, frames int) (frameSource, string, error) {
	if d.Data == "" {
		first := d.Drives + d.ValDrives
		p, err := newSimPool(seed, domainDrives, d.FramesPerDrive, d.Width, d.Height, frames, first, domainStream)
		if err != nil {
			return nil, "", err
		}
		return p, fmt.Sprintf("%d frames of the simulated pool's held-out drives %d-%d (seed %d)", frames, first, first+domainDrives-1, seed), nil
	}
	if d.ValSplit == "none" {
		return nil, "", nil
	}
	src := dataset.Source{Dir: d.Data, FS: d.DataFS, Layout: d.Layout, KITTIDepth: d.KITTIDepth, KITTIDepthFS: d.KITTIDepthFS}
	v, err := openDataFrames(src, d.ValSplit, frames)
	if err != nil {
		return nil, "", err
	}
	return v, fmt.Sprintf("%d frames of %s split %s", v.Len(), d.Data, d.ValSplit), nil
}

// addDomainRecord fits the training-domain record dom on the held-out
// frames of d (seed: the simulated pool's) with the depth model dm and the
// written AuxUE (model, spec), and writes it into the spec. It returns the
// record, nil when the data has no held-out split.
func addDomainRecord(ctx context.Context, dm AuxDepthModel, d AuxData, seed int64, dom AuxDomain, model, spec string, log *slog.Logger) (*domain.Record, error) {
	src, desc, err := domainSource(d, seed, dom.DomainFrames)
	if err != nil || src == nil {
		return nil, err
	}
	if src.Len() < minDomainFrames {
		if log != nil {
			log.Warn("train auxue: too few held-out frames for a training-domain record; the spec has none and the runtime's domain monitor will be off",
				"frames", src.Len(), "want", minDomainFrames, "source", desc)
		}
		return nil, nil
	}
	models, err := OpenModelPair(ctx, dm.DepthModel, dm.DepthSpec, model, spec, dm.Inference, log)
	if err != nil {
		return nil, fmt.Errorf("domain record: %w", err)
	}
	defer models.Close()
	as, err := ReadSpec(spec, infer.KindAuxUE)
	if err != nil {
		return nil, err
	}
	l := infer.DomainLayout(as)
	stats, err := domainStats(ctx, models, l, src)
	if err != nil {
		return nil, fmt.Errorf("domain record: %w", err)
	}
	rec, err := domain.Fit(l, stats, domain.FitOptions{Statistic: dom.DomainStatistic, Source: desc})
	if err != nil {
		return nil, err
	}
	return rec, writeDomainRecord(spec, as, rec)
}

// writeDomainRecord rewrites the AuxUE spec file path (read as as) with
// the record.
func writeDomainRecord(path string, as infer.IOSpec, rec *domain.Record) error {
	info := infer.AuxUEInfo{}
	if as.AuxUE != nil {
		info = *as.AuxUE
	}
	info.Domain = rec
	as.AuxUE = &info
	text, err := as.Marshal("IO spec (runtime/infer.IOSpec) of an AuxUE that reads its depth model's image input and depth, written by didoedge train auxue")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, text, 0o644); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// DomainConfig configures `didoedge model domain`: the statistics of
// in-domain frames, the record fitted on them for each statistic, and the
// frame-level AUC of each other set against in-domain test frames.
type DomainConfig struct {
	Depth, DepthSpec, AuxUE, AuxUESpec string
	Inference                          onnxrt.Config
	// Data: the in-domain frames the record is fitted on ("" = the
	// simulated pool's held-out drives, Seed, Frames of them).
	Data   string
	Split  string
	Frames int
	Seed   int64
	// Test: in-domain frames never used for the fit (the negatives of
	// every AUC); Sets: name -> directory of the positives.
	Test  string
	Sets  []NamedSet
	Write string // a statistic: write its record into AuxUESpec
	Log   *slog.Logger
}

// NamedSet is a data set under a name.
type NamedSet struct{ Name, Dir string }

// DomainResult is what model domain measured.
type DomainResult struct {
	Frames     int               `json:"frames"`
	TestFrames int               `json:"test_frames"`
	Source     string            `json:"source"`
	Layout     domain.Layout     `json:"layout"`
	Shrinkage  float64           `json:"shrinkage"`
	Sets       []DomainSetResult `json:"sets"`
	Thresholds map[string]Float  `json:"threshold_far_0.01"`
	TestFAR    map[string]Float  `json:"test_far_at_threshold"`
	Written    string            `json:"written,omitempty"`
}

// DomainSetResult is one set's frame-level AUC per statistic against the
// in-domain test frames ("ks_mean": the frame's mean K/S, the baseline
// the issue found flat across domains).
type DomainSetResult struct {
	Name   string           `json:"name"`
	Frames int              `json:"frames"`
	AUC    map[string]Float `json:"auc"`
	Median map[string]Float `json:"median_distance"`
}

// domainScores are the statistics compared.
var domainScores = []string{domain.Mahalanobis, domain.KNN, "ks_mean"}

// RunDomain measures the statistics (DomainConfig).
func RunDomain(ctx context.Context, cfg DomainConfig) (DomainResult, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var res DomainResult
	if cfg.Test == "" {
		return res, errors.New("model domain: --test DIR (in-domain frames not fitted on) is required")
	}
	models, err := OpenModelPair(ctx, cfg.Depth, cfg.DepthSpec, cfg.AuxUE, cfg.AuxUESpec, cfg.Inference, log)
	if err != nil {
		return res, err
	}
	defer models.Close()
	as, err := ReadSpec(cfg.AuxUESpec, infer.KindAuxUE)
	if err != nil {
		return res, err
	}
	l := infer.DomainLayout(as)
	var src frameSource
	var desc string
	if cfg.Data == "" {
		tc := AuxTrainConfig{Seed: cfg.Seed, AuxDomain: AuxDomain{DomainFrames: cfg.Frames}}
		tc.defaults()
		if src, desc, err = domainSource(tc.AuxData, tc.Seed, tc.DomainFrames); err != nil {
			return res, err
		}
	} else {
		split := cfg.Split
		if split == "" {
			split = dataset.SplitAll
		}
		if src, err = openDataFrames(dataset.Source{Dir: cfg.Data}, split, cfg.Frames); err != nil {
			return res, err
		}
		desc = fmt.Sprintf("%d frames of %s split %s", src.Len(), cfg.Data, split)
	}
	fit, err := domainStats(ctx, models, l, src)
	if err != nil {
		return res, err
	}
	recs := map[string]*domain.Record{}
	for _, s := range []string{domain.Mahalanobis, domain.KNN} {
		if recs[s], err = domain.Fit(l, fit, domain.FitOptions{Statistic: s, Source: desc}); err != nil {
			return res, err
		}
	}
	res = DomainResult{Frames: len(fit), Source: desc, Layout: l, Shrinkage: recs[domain.Mahalanobis].Shrinkage,
		Thresholds: map[string]Float{}, TestFAR: map[string]Float{}}
	score := func(dir string) (map[string][]float64, int, error) {
		d, err := openDataFrames(dataset.Source{Dir: dir}, dataset.SplitAll, 0)
		if err != nil {
			return nil, 0, err
		}
		d.withoutTruth = true // a set's frames need no ground truth (picture folders)
		st, err := domainStats(ctx, models, l, d)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", dir, err)
		}
		out := map[string][]float64{}
		for s, r := range recs {
			sc := r.NewScratch()
			for _, x := range st {
				v, err := r.Distance(x, sc)
				if err != nil {
					return nil, 0, err
				}
				out[s] = append(out[s], v)
			}
		}
		for _, x := range st {
			var m float64
			for b := range l.MapBands {
				m += x[l.Dim()-l.FeatureGroups-2*l.MapBands+b] / float64(l.MapBands)
			}
			out["ks_mean"] = append(out["ks_mean"], m)
		}
		return out, len(st), nil
	}
	neg, nneg, err := score(cfg.Test)
	if err != nil {
		return res, err
	}
	res.TestFrames = nneg
	for s, r := range recs {
		t, err := r.Threshold(0.01)
		if err != nil {
			return res, err
		}
		res.Thresholds[s] = Float(t)
		above := 0
		for _, v := range neg[s] {
			if v > t {
				above++
			}
		}
		res.TestFAR[s] = Float(float64(above) / float64(nneg))
	}
	for _, set := range cfg.Sets {
		pos, n, err := score(set.Dir)
		if err != nil {
			return res, err
		}
		sr := DomainSetResult{Name: set.Name, Frames: n, AUC: map[string]Float{}, Median: map[string]Float{}}
		for _, s := range domainScores {
			scores := append(append([]float64(nil), neg[s]...), pos[s]...)
			labels := make([]bool, len(scores))
			for i := nneg; i < len(labels); i++ {
				labels[i] = true
			}
			auc, err := auxue.RankAUC(scores, labels)
			if err != nil {
				return res, err
			}
			sr.AUC[s] = Float(auc)
			sr.Median[s] = Float(median(pos[s]))
		}
		res.Sets = append(res.Sets, sr)
		log.Info("model domain", "set", set.Name, "frames", n, "auc_mahalanobis", sr.AUC[domain.Mahalanobis],
			"auc_knn", sr.AUC[domain.KNN], "auc_ks_mean", sr.AUC["ks_mean"])
	}
	if cfg.Write != "" {
		r, ok := recs[cfg.Write]
		if !ok {
			return res, fmt.Errorf("model domain: --write %q, want %s or %s", cfg.Write, domain.Mahalanobis, domain.KNN)
		}
		if err := writeDomainRecord(cfg.AuxUESpec, as, r); err != nil {
			return res, err
		}
		res.Written = filepath.Clean(cfg.AuxUESpec)
	}
	return res, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// DomainFlags are the flags of `didoedge model domain`.
type DomainFlags struct {
	Models, Depth, DepthSpec, AuxUE, AuxUESpec, Data, Split, Test, Write, Providers string
	Frames                                                                          int
	Seed                                                                            int64
	Sets                                                                            setFlag
}

// setFlag collects repeated NAME=DIR values.
type setFlag []NamedSet

func (s *setFlag) String() string { return fmt.Sprint(*s) }

func (s *setFlag) Set(v string) error {
	for i := range len(v) {
		if v[i] == '=' && i > 0 && i < len(v)-1 {
			*s = append(*s, NamedSet{Name: v[:i], Dir: v[i+1:]})
			return nil
		}
	}
	return fmt.Errorf("%q: want NAME=DIR", v)
}

// AddFlags declares the flags on fs.
func (f *DomainFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Models, "models", "models", "directory of depth.onnx, depth.yaml, auxue.onnx, auxue.yaml (each overridable below)")
	fs.StringVar(&f.Depth, "depth", "", "depth model (default MODELS/depth.onnx)")
	fs.StringVar(&f.DepthSpec, "depth-spec", "", "its IO spec (default MODELS/depth.yaml)")
	fs.StringVar(&f.AuxUE, "auxue", "", "AuxUE model (default MODELS/auxue.onnx)")
	fs.StringVar(&f.AuxUESpec, "auxue-spec", "", "its IO spec (default MODELS/auxue.yaml); --write rewrites it")
	fs.StringVar(&f.Data, "data", "", "in-domain frames the record is fitted on (default: the simulated pool's held-out drives 50-57)")
	fs.StringVar(&f.Split, "split", "", "with --data: the split (default all)")
	fs.IntVar(&f.Frames, "frames", DefaultDomainFrames, "frames of the pool or at most this many of --data")
	fs.Int64Var(&f.Seed, "seed", 1, "the simulated pool's seed (the models' training seed)")
	fs.StringVar(&f.Test, "test", "", "in-domain frames never fitted on: the negatives of every AUC (required)")
	fs.Var(&f.Sets, "set", "NAME=DIR: a set whose frames are the positives of one AUC (repeat)")
	fs.StringVar(&f.Write, "write", "", "write the record of this statistic (mahalanobis or knn) into the AuxUE spec")
	fs.StringVar(&f.Providers, "providers", "cpu", "execution providers in order")
}

// Config is the run the flags describe.
func (f *DomainFlags) Config(log *slog.Logger) (DomainConfig, error) {
	pick := func(v, name string) string {
		if v != "" {
			return v
		}
		return filepath.Join(f.Models, name)
	}
	inf, err := onnxrt.ParseProviders(f.Providers, "")
	if err != nil {
		return DomainConfig{}, fmt.Errorf("flag -providers: %w", err)
	}
	return DomainConfig{Depth: pick(f.Depth, "depth.onnx"), DepthSpec: pick(f.DepthSpec, "depth.yaml"), AuxUE: pick(f.AuxUE, "auxue.onnx"),
		AuxUESpec: pick(f.AuxUESpec, "auxue.yaml"), Inference: inf, Data: f.Data, Split: f.Split, Frames: f.Frames, Seed: f.Seed,
		Test: f.Test, Sets: f.Sets, Write: f.Write, Log: log}, nil
}
