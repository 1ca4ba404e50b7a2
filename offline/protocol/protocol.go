package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/offline/depthnet"
)

// Method names besides the AuxUE read-outs (see auxPlan).
const (
	MethodMain     = "main" // the frozen main model (its depth is every AuxUE method's depth)
	MethodEnsemble = "ensemble"
	MethodInject   = "inject_dropout"
	MethodGradient = "gradient"
	// MethodDIDOLabeledOnly is dido_sep trained on labeled pixels only (the
	// strict reading of eq. 4, local features), run when auxue.unlabeled_kl,
	// auxue.global_context_bands or auxue.outliers is set.
	MethodDIDOLabeledOnly = "dido_sep_eq4"
)

// Curves holds what the plots need beyond the table (clean test frames,
// first seed).
type Curves struct {
	Fractions []float64
	// Sparsification curves of RMSE, averaged over images, per method, and
	// the oracle of the main model's depth.
	Spars       map[string][]float64
	OracleMain  []float64
	SkyScores   map[string][]float32 // sky (positive) and GT (negative) pixels
	SkyLabels   map[string][]bool
	MethodOrder []string
}

// Options are the run's outside inputs.
type Options struct {
	// Out is the output directory; trained models are cached in Cache
	// (default Out/cache), named by method, seed and a hash of what decides them.
	Out, Cache string
	// Command is recorded in the report.
	Command    string
	ConfigPath string
	Log        *slog.Logger
}

type method struct {
	name      string
	aux       *auxMethod
	aleatoric bool // a scale in metres (UCE is defined)
}

// methodAcc accumulates one (seed, method) over the frames of one condition.
type methodAcc struct {
	spR, spA   metrics.SparsMean
	dq         metrics.DepthMean
	sky        metrics.BinaryScores
	skyAll     float64
	skyN       int
	errs, uncs []float32
}

// Run executes the protocol of c and returns the table and the plot data.
func Run(ctx context.Context, c *Config, opt Options) (*Results, *Curves, error) {
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	res := &Results{Meta: Meta{Config: opt.ConfigPath, ConfigHash: hashOf(c), Command: opt.Command, Machine: machine(),
		Started: start.UTC().Format(time.RFC3339), WallSeconds: map[string]float64{}, Sizes: map[string]int{}}}
	cache := opt.Cache
	if cache == "" {
		cache = filepath.Join(opt.Out, "cache")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create cache: %w", err)
	}
	d := c.Data
	W, H := d.Width, d.Height
	tab := newTable(len(c.Seeds))
	section := func(name string, t0 time.Time) { res.Meta.WallSeconds[name] += time.Since(t0).Seconds() }
	// Wall times only mean training time for models that were not cached.
	fromCache := map[string]int{"ensemble_nets_from_cache": 0, "auxue_models_from_cache": 0}

	// The main model (frozen), per seed the ensemble members, and the AuxUEs
	// of every seed. The ensemble members need nothing but the data, so each
	// seed's members train one after the other beside the main model and
	// then beside the AuxUEs (which need the main model): with 3 seeds on 2
	// cores every training runs its convolutions on its own goroutine and the
	// cores stay busy through the serial stretches of each training. The
	// sections' wall times overlap.
	var (
		mainNet           *depthnet.Net
		main              *depthModel
		mainID            string
		ens               = make([][]*depthModel, len(c.Seeds))
		models            = make([][]*auxue.Model, len(c.Seeds))
		notes             = make([][]string, len(c.Seeds))
		cachedAux         = make([]int, len(c.Seeds))
		cachedEns         = make([]int, len(c.Seeds))
		wallEnsSeed       = make([]float64, len(c.Seeds))
		wallMain, wallAux float64
		auxIn             int
		decFeats          []float32
	)
	variants, auxMethods := auxPlan(c)
	convWorkers := seedConvWorkers(len(c.Seeds))
	tStart := time.Now()
	train, tctx := errgroup.WithContext(ctx)
	for si, s := range c.Seeds {
		train.Go(func() error {
			for j := 0; j < c.Baselines.EnsembleMembers; j++ {
				net, src, err := loadOrTrainDepth(tctx, c, int64(100*s+j+1), false, cache, convWorkers, log)
				if err != nil {
					return err
				}
				if strings.HasPrefix(src, "cached") {
					cachedEns[si]++
				}
				ens[si] = append(ens[si], newDepthModel(net, W, H))
			}
			wallEnsSeed[si] = time.Since(tStart).Seconds()
			return nil
		})
	}
	train.Go(func() error {
		t0 := time.Now()
		var src string
		var err error
		if mainNet, src, err = loadOrTrainDepth(tctx, c, c.Main.Seed, true, cache, 0, log); err != nil {
			return err
		}
		res.Meta.MainModel = src
		if c.Main.Reference != "" && fileExists(c.Main.Reference) {
			b, err := os.ReadFile(c.Main.Reference)
			if err != nil {
				return fmt.Errorf("main model: %w", err)
			}
			mainID = hashOf(b) // AuxUEs trained on another reference checkpoint are not reused
		} else {
			mainID = hashOf(depthCacheKey{W: W, H: H, Drives: d.Drives, FramesPerDrive: d.FramesPerDrive, TrainSeed: d.TrainSeed, Main: c.Main, Seed: c.Main.Seed})
		}
		main = newDepthModel(mainNet, W, H)
		wallMain = time.Since(t0).Seconds()

		// AuxUE variants per seed.
		t0 = time.Now()
		auxIn = auxInputChannels(c, main)
		if c.auxInputs().decoder {
			decFeats = make([]float32, (auxIn-c.auxInputs().content())*(W/c.AuxUE.Factor)*(H/c.AuxUE.Factor))
		}
		// The seeds train concurrently (their runs are independent), each
		// building its data with a private copy of the main network.
		err = forEachSeed(tctx, len(c.Seeds), func(si int) error {
			s := int64(c.Seeds[si])
			var data *auxData
			get := func() (*auxData, error) {
				if data == nil {
					net, err := cloneDepthNet(mainNet)
					if err != nil {
						return nil, err
					}
					net.SetWorkers(convWorkers)
					if data, err = buildAuxData(tctx, c, newDepthModel(net, W, H), s); err != nil {
						return nil, err
					}
				}
				return data, nil
			}
			for _, v := range variants {
				m, cached, err := loadOrTrainAux(tctx, c, v, auxIn, s, mainID, get, cache, convWorkers, log)
				if errors.Is(err, errDiverged) {
					// Reported, not hidden: the variant's rows average the other seeds.
					notes[si] = append(notes[si], fmt.Sprintf("AuxUE %s, seed %d: %v; its methods are left out for this seed", v.id(), s, err))
					log.Warn("eval: auxue diverged", "variant", v.id(), "seed", s, "err", err)
					models[si] = append(models[si], nil)
					continue
				}
				if err != nil {
					return err
				}
				log.Info("eval: auxue ready", "variant", v.id(), "seed", s, "cached", cached)
				if cached {
					cachedAux[si]++
				}
				models[si] = append(models[si], m)
			}
			return nil
		})
		wallAux = time.Since(t0).Seconds()
		return err
	})
	if err := train.Wait(); err != nil {
		return nil, nil, err
	}
	for si := range c.Seeds {
		res.Meta.Notes = append(res.Meta.Notes, notes[si]...)
		fromCache["auxue_models_from_cache"] += cachedAux[si]
		fromCache["ensemble_nets_from_cache"] += cachedEns[si]
	}
	res.Meta.WallSeconds["train_main"] = wallMain
	res.Meta.WallSeconds["train_ensemble"] = slices.Max(append(wallEnsSeed, 0))
	res.Meta.WallSeconds["train_auxue"] = wallAux

	methods := []method{{name: MethodMain}}
	for i := range auxMethods {
		am := &auxMethods[i]
		methods = append(methods, method{name: am.name, aux: am, aleatoric: !am.epistemic})
	}
	if c.Baselines.EnsembleMembers > 0 {
		methods = append(methods, method{name: MethodEnsemble})
	}
	if c.Baselines.InjectSamples > 0 {
		methods = append(methods, method{name: MethodInject})
	}
	if c.Baselines.Gradient {
		methods = append(methods, method{name: MethodGradient})
	}
	curves := &Curves{Spars: map[string][]float64{}, SkyScores: map[string][]float32{}, SkyLabels: map[string][]bool{}}
	for _, m := range methods {
		if m.name != MethodMain {
			curves.MethodOrder = append(curves.MethodOrder, m.name)
		}
	}

	// Data.
	t0 := time.Now()
	test, err := renderFrames(ctx, sim.WorldOutdoor, d.TestSeed, d.TestDrives, d.TestFrames, W, H)
	if err != nil {
		return nil, nil, err
	}
	indoor, err := renderFrames(ctx, sim.WorldIndoor, d.IndoorSeed, max(1, d.IndoorFrames/4), d.IndoorFrames, W, H)
	if err != nil {
		return nil, nil, err
	}
	section("render_test", t0)
	res.Meta.Sizes = map[string]int{"width": W, "height": H, "test_frames": len(test), "indoor_frames": len(indoor),
		"auxue_train_frames": c.AuxUE.Frames, "train_pool_frames": d.Drives * d.FramesPerDrive,
		"corruptions": len(c.Corruptions), "severities": len(c.Severities), "seeds": len(c.Seeds),
		"auxue_models": len(variants) * len(c.Seeds), "ensemble_nets": c.Baselines.EnsembleMembers * len(c.Seeds)}
	for k, v := range fromCache {
		res.Meta.Sizes[k] = v
	}

	conds := []evalCond{{CorrClean, 0}}
	for _, s := range c.Severities {
		for _, name := range c.Corruptions {
			conds = append(conds, evalCond{name, s})
		}
	}

	t0 = time.Now()
	plan := newEvalPlan(c, methods, variants, curves, len(test))
	workers := make([]*seedWorker, len(c.Seeds))
	main.net.SetWorkers(convWorkers)
	for si := range c.Seeds {
		if workers[si], err = newSeedWorker(plan, si, models[si], ens[si], main, auxIn, convWorkers); err != nil {
			return nil, nil, err
		}
	}
	ev := &evaluation{plan: plan, workers: workers, main: main, test: test, indoor: indoor, conds: conds,
		nMethods: len(methods), w: W, h: H, decLen: len(decFeats), log: log}
	if err := ev.run(ctx, tab); err != nil {
		return nil, nil, err
	}
	section("evaluate", t0)

	if c.Tabular.Enabled {
		t0 = time.Now()
		if err := runTabular(ctx, c, tab); err != nil {
			return nil, nil, err
		}
		section("tabular", t0)
	}
	tab.addCorruptionMeans()
	var dropped []string
	res.Runs, dropped = tab.rows()
	if len(dropped) > 0 {
		res.Meta.Notes = append(res.Meta.Notes, fmt.Sprintf("%d rows with an infinite value were left out: %s", len(dropped), strings.Join(dropped, "; ")))
	}
	res.Meta.WallSeconds["total"] = time.Since(start).Seconds()
	if err := SaveCurves(CurvesPath(cache, c), curves); err != nil {
		return nil, nil, err
	}
	return res, curves, nil
}
