package eval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/calib/corrupt"
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/camera/sim"
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
	dc         metrics.BinaryScores
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
	hw := W * H
	tab := newTable(len(c.Seeds))
	section := func(name string, t0 time.Time) { res.Meta.WallSeconds[name] += time.Since(t0).Seconds() }
	// Wall times only mean training time for models that were not cached.
	fromCache := map[string]int{"ensemble_nets_from_cache": 0, "auxue_models_from_cache": 0}

	// Main model (frozen) and, per seed, the ensemble members.
	t0 := time.Now()
	mainNet, src, err := loadOrTrainDepth(ctx, c, c.Main.Seed, true, cache, log)
	if err != nil {
		return nil, nil, err
	}
	res.Meta.MainModel = src
	var mainID string
	if c.Main.Reference != "" && fileExists(c.Main.Reference) {
		b, err := os.ReadFile(c.Main.Reference)
		if err != nil {
			return nil, nil, fmt.Errorf("main model: %w", err)
		}
		mainID = hashOf(b) // AuxUEs trained on another reference checkpoint are not reused
	} else {
		mainID = hashOf(depthCacheKey{W: W, H: H, Drives: d.Drives, FramesPerDrive: d.FramesPerDrive, TrainSeed: d.TrainSeed, Main: c.Main, Seed: c.Main.Seed})
	}
	main := newDepthModel(mainNet, W, H)
	section("train_main", t0)
	t0 = time.Now()
	ens := make([][]*depthModel, len(c.Seeds))
	for si, s := range c.Seeds {
		for j := 0; j < c.Baselines.EnsembleMembers; j++ {
			net, src, err := loadOrTrainDepth(ctx, c, int64(100*s+j+1), false, cache, log)
			if err != nil {
				return nil, nil, err
			}
			if strings.HasPrefix(src, "cached") {
				fromCache["ensemble_nets_from_cache"]++
			}
			ens[si] = append(ens[si], newDepthModel(net, W, H))
		}
	}
	section("train_ensemble", t0)

	// AuxUE variants per seed.
	t0 = time.Now()
	variants, auxMethods := auxPlan(c)
	auxIn := auxInputChannels(c, main)
	var decFeats []float32
	if auxIn > auxChannels {
		decFeats = make([]float32, (auxIn-auxChannels)*(W/2)*(H/2))
	}
	models := make([][]*auxue.Model, len(c.Seeds))
	for si, s := range c.Seeds {
		var data *auxData
		get := func() (*auxData, error) {
			if data == nil {
				var err error
				if data, err = buildAuxData(ctx, c, main, int64(s)); err != nil {
					return nil, err
				}
			}
			return data, nil
		}
		for _, v := range variants {
			m, cached, err := loadOrTrainAux(ctx, c, v, auxIn, int64(s), mainID, get, cache, log)
			if errors.Is(err, errDiverged) {
				// Reported, not hidden: the variant's rows average the other seeds.
				res.Meta.Notes = append(res.Meta.Notes, fmt.Sprintf("AuxUE %s, seed %d: %v; its methods are left out for this seed", v.id(), s, err))
				log.Warn("eval: auxue diverged", "variant", v.id(), "seed", s, "err", err)
				models[si] = append(models[si], nil)
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			log.Info("eval: auxue ready", "variant", v.id(), "seed", s, "cached", cached)
			if cached {
				fromCache["auxue_models_from_cache"]++
			}
			models[si] = append(models[si], m)
		}
	}
	section("train_auxue", t0)

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
	t0 = time.Now()
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

	type cond struct {
		corr string
		sev  int
	}
	conds := []cond{{CorrClean, 0}}
	for _, s := range c.Severities {
		for _, name := range c.Corruptions {
			conds = append(conds, cond{name, s})
		}
	}

	t0 = time.Now()
	sp := metrics.Sparsifier{Step: c.SparsStep}
	var uce metrics.UCE
	var (
		depth    = make([]float32, hw)
		ensDepth = make([]float32, hw)
		ensVar   = make([]float32, hw)
		tmp      = make([]float32, hw)
		grad     = make([]float32, hw)
		unc      = make([][]float32, len(methods))
		skyMask  = make([]bool, hw)
		gtMask   = make([]bool, hw)
		rgb      = make([]uint8, 3*hw)
		readout  = newAuxReadout(W, H, auxIn)
		corr     = corrupt.NewCorruptor()
	)
	for i := range unc {
		unc[i] = make([]float32, hw)
	}
	// uncertainty maps of every method for one frame and seed
	produce := func(si int, pixels []uint8, frameIdx, condIdx int) ([]float32, error) {
		var ensOut []float32
		for mi, m := range methods {
			switch {
			case m.name == MethodMain:
				for i := range unc[mi] {
					unc[mi][i] = 0
				}
			case m.aux != nil:
				model := models[si][m.aux.variant]
				if model == nil {
					continue
				}
				v := variants[m.aux.variant]
				if m.aux.epistemic {
					if err := readout.run(model, v.Categorical, nil, unc[mi]); err != nil {
						return nil, err
					}
				} else if err := readout.run(model, false, unc[mi], nil); err != nil {
					return nil, err
				}
			case m.name == MethodEnsemble:
				for i := range ensDepth {
					ensDepth[i], ensVar[i] = 0, 0
				}
				members := ens[si]
				for _, em := range members {
					em.setImage(pixels, false)
					if err := em.predict(tmp); err != nil {
						return nil, err
					}
					for i, v := range tmp {
						ensDepth[i] += v
						ensVar[i] += v * v
					}
				}
				k := float32(len(members))
				for i := range ensDepth {
					mu := ensDepth[i] / k
					ensDepth[i] = mu
					unc[mi][i] = max(ensVar[i]/k-mu*mu, 0)
				}
				ensOut = ensDepth
			case m.name == MethodInject:
				rng := rand.New(rand.NewPCG(uint64(c.Seeds[si]), uint64(condIdx)<<20|uint64(frameIdx)))
				main.setImage(pixels, false)
				if err := main.injectVariance(c.Baselines.InjectSamples, c.Baselines.InjectP, rng, unc[mi]); err != nil {
					return nil, err
				}
			case m.name == MethodGradient:
				copy(unc[mi], grad)
			}
		}
		return ensOut, nil
	}

	// newAccs makes the per (seed, method) accumulators of one condition.
	newAccs := func() [][]*methodAcc {
		a := make([][]*methodAcc, len(c.Seeds))
		for si := range a {
			a[si] = make([]*methodAcc, len(methods))
			for mi := range a[si] {
				a[si][mi] = &methodAcc{}
			}
		}
		return a
	}
	var indoorAccs [][]*methodAcc
	for ci, cd := range conds {
		accs := newAccs()
		for fi := range test {
			fr := &test[fi]
			pixels := fr.rgb
			if cd.sev > 0 {
				if err := corr.Apply(rgb, fr.rgb, W, H, cd.corr, cd.sev, uint64(1000*fi+cd.sev)); err != nil {
					return nil, nil, fmt.Errorf("corrupt frame %d: %w", fi, err)
				}
				pixels = rgb
			}
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			if c.Baselines.Gradient {
				main.setImage(pixels, false)
				if err := main.gradientScore(pixels, grad); err != nil {
					return nil, nil, err
				}
			}
			main.setImage(pixels, false)
			if err := main.predictFeatures(depth, decFeats); err != nil {
				return nil, nil, err
			}
			readout.setFeatures(main.image(), depth, decFeats)
			for i := range gtMask {
				gtMask[i] = fr.sparse[i] > 0
				skyMask[i] = fr.sem[i] == metrics.SkyClass
			}
			for si := range c.Seeds {
				ensOut, err := produce(si, pixels, fi, ci)
				if err != nil {
					return nil, nil, err
				}
				for mi, m := range methods {
					if m.aux != nil && models[si][m.aux.variant] == nil {
						continue
					}
					a := accs[si][mi]
					pred := depth
					if m.name == MethodEnsemble {
						pred = ensOut
					}
					if m.name == MethodMain || m.name == MethodEnsemble {
						q, err := metrics.Depth(pred, fr.sparse, metrics.KITTIRange)
						if err != nil {
							return nil, nil, err
						}
						a.dq.Add(q)
					}
					if m.name == MethodMain {
						continue
					}
					u := unc[mi]
					r, err := sp.Evaluate(pred, fr.sparse, u, metrics.SparsRMSE)
					if err != nil {
						return nil, nil, fmt.Errorf("%s: %w", m.name, err)
					}
					a.spR.Add(r)
					if ci == 0 && si == 0 {
						if curves.Fractions == nil {
							curves.Fractions = append([]float64(nil), r.Fractions...)
						}
						if len(r.Curve) == len(curves.Fractions) {
							acc := curves.Spars[m.name]
							if acc == nil {
								acc = make([]float64, len(r.Curve))
							}
							for i, v := range r.Curve {
								acc[i] += v / float64(len(test))
							}
							curves.Spars[m.name] = acc
							if m.aux != nil && m.name == methods[1].name {
								if curves.OracleMain == nil {
									curves.OracleMain = make([]float64, len(r.Oracle))
								}
								for i, v := range r.Oracle {
									curves.OracleMain[i] += v / float64(len(test))
								}
							}
						}
					}
					if r, err = sp.Evaluate(pred, fr.sparse, u, metrics.SparsAbsRel); err != nil {
						return nil, nil, fmt.Errorf("%s: %w", m.name, err)
					}
					a.spA.Add(r)
					if m.aleatoric {
						for i, y := range fr.sparse {
							if y > 0 {
								a.errs = append(a.errs, float32(math.Abs(float64(pred[i]-y))))
								a.uncs = append(a.uncs, u[i])
							}
						}
					}
					if _, err := a.sky.AddMasked(u, skyMask, true); err != nil {
						return nil, nil, err
					}
					if _, err := a.sky.AddMasked(u, gtMask, false); err != nil {
						return nil, nil, err
					}
					if ci == 0 {
						if _, err := a.dc.AddMasked(u, gtMask, false); err != nil {
							return nil, nil, err
						}
						if si == 0 {
							for i := range u {
								if skyMask[i] || gtMask[i] {
									curves.SkyScores[m.name] = append(curves.SkyScores[m.name], u[i])
									curves.SkyLabels[m.name] = append(curves.SkyLabels[m.name], skyMask[i])
								}
							}
						}
					}
					if v, ok, err := metrics.SkyAll(u, fr.sem, metrics.SkyClass); err != nil {
						return nil, nil, err
					} else if ok {
						a.skyAll += v
						a.skyN++
					}
				}
			}
		}
		if ci == 0 {
			// Dataset change: indoor GT pixels are the positives.
			indoorAccs = accs
			for fi := range indoor {
				fr := &indoor[fi]
				if c.Baselines.Gradient {
					main.setImage(fr.rgb, false)
					if err := main.gradientScore(fr.rgb, grad); err != nil {
						return nil, nil, err
					}
				}
				main.setImage(fr.rgb, false)
				if err := main.predictFeatures(depth, decFeats); err != nil {
					return nil, nil, err
				}
				readout.setFeatures(main.image(), depth, decFeats)
				for i := range gtMask {
					gtMask[i] = fr.sparse[i] > 0
				}
				for si := range c.Seeds {
					if _, err := produce(si, fr.rgb, fi, 1<<10); err != nil {
						return nil, nil, err
					}
					for mi, m := range methods {
						if m.name == MethodMain || (m.aux != nil && models[si][m.aux.variant] == nil) {
							continue
						}
						if _, err := indoorAccs[si][mi].dc.AddMasked(unc[mi], gtMask, true); err != nil {
							return nil, nil, err
						}
					}
				}
			}
		}
		// Finalize the condition.
		for si := range c.Seeds {
			for mi, m := range methods {
				if m.aux != nil && models[si][m.aux.variant] == nil {
					continue
				}
				a := accs[si][mi]
				set := func(exp, metric string, v float64) {
					tab.set(rowKey{m.name, exp, cd.corr, cd.sev, metric}, si, v)
				}
				if m.name == MethodMain || m.name == MethodEnsemble {
					q := a.dq.Mean()
					set(ExpMainTask, "absrel", q.AbsRel)
					set(ExpMainTask, "rmse", q.RMSE)
				}
				if m.name == MethodMain {
					continue
				}
				ause, aurg, _ := a.spR.Mean()
				set(ExpAleatoric, "ause_rmse", ause)
				set(ExpAleatoric, "aurg_rmse", aurg)
				ause, aurg, _ = a.spA.Mean()
				set(ExpAleatoric, "ause_rel", ause)
				set(ExpAleatoric, "aurg_rel", aurg)
				if m.aleatoric && len(a.errs) > 0 {
					v, err := uce.Evaluate(a.errs, a.uncs, nil)
					if err != nil {
						return nil, nil, err
					}
					set(ExpAleatoric, "uce", v)
				}
				if v, err := a.sky.AUC(); err == nil {
					set(ExpSky, "auc", v)
				}
				if v, err := a.sky.AUPR(); err == nil {
					set(ExpSky, "aupr", v)
				}
				if a.skyN > 0 {
					set(ExpSky, "sky_all", a.skyAll/float64(a.skyN))
				}
				if ci == 0 {
					if v, err := a.dc.AUC(); err == nil {
						tab.set(rowKey{m.name, ExpDatasetChange, CorrClean, 0, "auc"}, si, v)
					}
					if v, err := a.dc.AUPR(); err == nil {
						tab.set(rowKey{m.name, ExpDatasetChange, CorrClean, 0, "aupr"}, si, v)
					}
				}
			}
		}
		log.Info("eval: condition done", "corruption", cd.corr, "severity", cd.sev, "done", ci+1, "of", len(conds),
			"elapsed", time.Since(t0).Round(time.Second))
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
	return res, curves, nil
}
