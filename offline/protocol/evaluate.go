package protocol

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/pkg/nn"
)

// The evaluation runs every method on every frame of every condition. What
// does not depend on the seed (the main model's depth, features and gradient
// score) is computed once per frame; then one seedWorker per seed runs that
// seed's AuxUEs, ensemble and dropout samples and accumulates its metrics,
// the workers running concurrently (each owns its models and buffers).

// seedWorker evaluates the methods of one seed.
type seedWorker struct {
	si                    int
	seed                  int64
	models                []*auxue.Model // per AuxUE variant; nil where training diverged
	ens                   []*depthModel
	inject                *depthModel // a private copy of the main network (layers keep activations)
	readout               *auxReadout
	unc                   [][]float32 // per method, the map of the current frame
	ensDepth, ensVar, tmp []float32
	spars                 metrics.Sparsifier
	accs                  []*methodAcc           // per method, the current condition
	dc                    []metrics.BinaryScores // per method, the dataset-change pool (clean outdoor and indoor)
	// sortBuf is the radix-sort scratch every pool of this worker shares:
	// finalize sorts them one after the other, so one buffer the size of the
	// largest class serves the 2 x methods pools.
	sortBuf metrics.SortBuffer
}

// frameInputs is what every seed reads of one frame (read-only while the
// workers run).
type frameInputs struct {
	fr              *frame
	pixels          []uint8
	img, depth      []float32 // the main model's normalized input and depth
	dec, grad       []float32
	gtMask, skyMask []bool
	cond, index     int // condition and frame index (seed the dropout masks)
}

// evalPlan is the fixed part of an evaluation: methods, variants and the
// data the workers share.
type evalPlan struct {
	c        *Config
	methods  []method
	variants []auxVariant
	// byVariant[v] lists the (scale, epistemic) method indices read from
	// variant v (-1: none), so that one forward pass serves both.
	byVariant [][2]int
	curves    *Curves
	nTest     int
}

func newEvalPlan(c *Config, methods []method, variants []auxVariant, curves *Curves, nTest int) *evalPlan {
	p := &evalPlan{c: c, methods: methods, variants: variants, curves: curves, nTest: nTest}
	p.byVariant = make([][2]int, len(variants))
	for v := range p.byVariant {
		p.byVariant[v] = [2]int{-1, -1}
	}
	for mi, m := range methods {
		if m.aux == nil {
			continue
		}
		slot := 0
		if m.aux.epistemic {
			slot = 1
		}
		p.byVariant[m.aux.variant][slot] = mi
	}
	return p
}

// cloneDepthNet copies a network's weights into a new one of the same
// configuration.
func cloneDepthNet(n *depthnet.Net) (*depthnet.Net, error) {
	c, err := depthnet.New(n.Config)
	if err != nil {
		return nil, err
	}
	for i, p := range n.Params() {
		copy(nn.Data(c.Params()[i].Value), nn.Data(p.Value))
	}
	return c, nil
}

// newSeedWorker makes seed si's worker; its networks split their
// convolutions across convWorkers goroutines (nn.Conv2d.SetWorkers).
func newSeedWorker(p *evalPlan, si int, models []*auxue.Model, ens []*depthModel, main *depthModel, auxIn, convWorkers int) (*seedWorker, error) {
	c := p.c
	W, H := c.Data.Width, c.Data.Height
	hw := W * H
	w := &seedWorker{si: si, seed: int64(c.Seeds[si]), models: models, ens: ens,
		readout:  newAuxReadout(W, H, c.AuxUE.Factor, auxIn, c.auxInputs()),
		ensDepth: make([]float32, hw), ensVar: make([]float32, hw), tmp: make([]float32, hw),
		spars: metrics.Sparsifier{Step: c.SparsStep}}
	if c.Baselines.InjectSamples > 0 {
		net, err := cloneDepthNet(main.net)
		if err != nil {
			return nil, err
		}
		w.inject = newDepthModel(net, W, H)
		net.SetWorkers(convWorkers)
	}
	for _, m := range models {
		if m != nil {
			m.SetWorkers(convWorkers)
		}
	}
	for _, em := range ens {
		em.net.SetWorkers(convWorkers)
	}
	w.unc = make([][]float32, len(p.methods))
	for i := range w.unc {
		w.unc[i] = make([]float32, hw)
	}
	w.dc = make([]metrics.BinaryScores, len(p.methods))
	for i := range w.dc {
		w.dc[i].UseBuffer(&w.sortBuf)
	}
	return w, nil
}

func newAccs(n int) []*methodAcc {
	a := make([]*methodAcc, n)
	for i := range a {
		a[i] = &methodAcc{}
	}
	return a
}

// resetAccs empties the per-method accumulators for the next condition,
// keeping their buffers (the pooled sky pixels run to millions).
func (w *seedWorker) resetAccs(n int) {
	if w.accs == nil {
		w.accs = newAccs(n)
		for _, a := range w.accs {
			a.sky.UseBuffer(&w.sortBuf)
		}
		return
	}
	for _, a := range w.accs {
		sky, errs, uncs := a.sky, a.errs[:0], a.uncs[:0]
		sky.Reset()
		*a = methodAcc{sky: sky, errs: errs, uncs: uncs}
	}
}

// skip reports whether method m has no model for this seed.
func (w *seedWorker) skip(m method) bool { return m.aux != nil && w.models[m.aux.variant] == nil }

// produce fills w.unc with every method's map of the frame and returns the
// ensemble's mean depth (nil without an ensemble).
func (w *seedWorker) produce(p *evalPlan, in *frameInputs) ([]float32, error) {
	c := p.c
	w.readout.setFeatures(in.img, in.depth, in.dec)
	for v, mis := range p.byVariant {
		model := w.models[v]
		if model == nil || (mis[0] < 0 && mis[1] < 0) {
			continue
		}
		var scale, epis []float32
		if mis[0] >= 0 {
			scale = w.unc[mis[0]]
		}
		if mis[1] >= 0 {
			epis = w.unc[mis[1]]
		}
		if err := w.readout.run(model, p.variants[v].Categorical, scale, epis); err != nil {
			return nil, fmt.Errorf("auxue %s: %w", p.variants[v].id(), err)
		}
	}
	var ensOut []float32
	for mi, m := range p.methods {
		switch m.name {
		case MethodMain:
			clear(w.unc[mi])
		case MethodEnsemble:
			clear(w.ensDepth)
			clear(w.ensVar)
			for _, em := range w.ens {
				em.setImage(in.pixels, false)
				if err := em.predict(w.tmp); err != nil {
					return nil, err
				}
				for i, v := range w.tmp {
					w.ensDepth[i] += v
					w.ensVar[i] += v * v
				}
			}
			k := float32(len(w.ens))
			for i := range w.ensDepth {
				mu := w.ensDepth[i] / k
				w.ensDepth[i] = mu
				w.unc[mi][i] = max(w.ensVar[i]/k-mu*mu, 0)
			}
			ensOut = w.ensDepth
		case MethodInject:
			rng := rand.New(rand.NewPCG(uint64(w.seed), uint64(in.cond)<<20|uint64(in.index)))
			w.inject.setImage(in.pixels, false)
			if err := w.inject.injectVariance(c.Baselines.InjectSamples, c.Baselines.InjectP, rng, w.unc[mi]); err != nil {
				return nil, err
			}
		case MethodGradient:
			copy(w.unc[mi], in.grad)
		}
	}
	return ensOut, nil
}

// accumulate adds the frame's maps of every method to w.accs. The clean
// condition (cond 0) also feeds the dataset-change pools and, for the first
// seed, the plot curves.
func (w *seedWorker) accumulate(p *evalPlan, in *frameInputs, ensOut []float32) error {
	fr := in.fr
	for mi, m := range p.methods {
		if w.skip(m) {
			continue
		}
		a := w.accs[mi]
		pred := in.depth
		if m.name == MethodEnsemble {
			pred = ensOut
		}
		if m.name == MethodMain || m.name == MethodEnsemble {
			q, err := metrics.Depth(pred, fr.sparse, metrics.KITTIRange)
			if err != nil {
				return err
			}
			a.dq.Add(q)
		}
		if m.name == MethodMain {
			continue
		}
		u := w.unc[mi]
		r, err := w.spars.Evaluate(pred, fr.sparse, u, metrics.SparsRMSE)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		a.spR.Add(r)
		if in.cond == 0 && w.si == 0 {
			p.addSparsCurve(m, r)
		}
		if r, err = w.spars.Evaluate(pred, fr.sparse, u, metrics.SparsAbsRel); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
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
		if _, err := a.sky.AddMasked(u, in.skyMask, true); err != nil {
			return err
		}
		if _, err := a.sky.AddMasked(u, in.gtMask, false); err != nil {
			return err
		}
		if in.cond == 0 {
			if _, err := w.dc[mi].AddMasked(u, in.gtMask, false); err != nil {
				return err
			}
			if w.si == 0 {
				for i := range u {
					if in.skyMask[i] || in.gtMask[i] {
						p.curves.SkyScores[m.name] = append(p.curves.SkyScores[m.name], u[i])
						p.curves.SkyLabels[m.name] = append(p.curves.SkyLabels[m.name], in.skyMask[i])
					}
				}
			}
		}
		if v, ok, err := metrics.SkyAll(u, fr.sem, metrics.SkyClass); err != nil {
			return err
		} else if ok {
			a.skyAll += v
			a.skyN++
		}
	}
	return nil
}

// addIndoor adds the frame's ground-truth pixels of every method to the
// dataset-change positives.
func (w *seedWorker) addIndoor(p *evalPlan, in *frameInputs) error {
	for mi, m := range p.methods {
		if m.name == MethodMain || w.skip(m) {
			continue
		}
		if _, err := w.dc[mi].AddMasked(w.unc[mi], in.gtMask, true); err != nil {
			return err
		}
	}
	return nil
}

// addSparsCurve adds one clean image's RMSE sparsification curve of m (first
// seed) to the plot data, averaged over the test frames.
func (p *evalPlan) addSparsCurve(m method, r metrics.Sparsification) {
	cv := p.curves
	if cv.Fractions == nil {
		cv.Fractions = append([]float64(nil), r.Fractions...)
	}
	if len(r.Curve) != len(cv.Fractions) {
		return
	}
	acc := cv.Spars[m.name]
	if acc == nil {
		acc = make([]float64, len(r.Curve))
	}
	for i, v := range r.Curve {
		acc[i] += v / float64(p.nTest)
	}
	cv.Spars[m.name] = acc
	if m.aux != nil && m.name == p.methods[1].name {
		if cv.OracleMain == nil {
			cv.OracleMain = make([]float64, len(r.Oracle))
		}
		for i, v := range r.Oracle {
			cv.OracleMain[i] += v / float64(p.nTest)
		}
	}
}

// forEachSeed runs fn for the seed indices 0..n-1 concurrently and returns
// the first error.
func forEachSeed(ctx context.Context, n int, fn func(si int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for si := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ctx.Err(); err != nil {
				errs[si] = err
				return
			}
			errs[si] = fn(si)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// finalize appends the seed's figures of one condition to cells; clean adds
// the dataset-change areas, whose pools are complete after the clean
// condition.
func (w *seedWorker) finalize(p *evalPlan, cells *[]tableCell, corr string, sev int, clean bool, uce *metrics.UCE) error {
	for mi, m := range p.methods {
		if w.skip(m) {
			continue
		}
		a := w.accs[mi]
		set := func(exp, metric string, v float64) {
			*cells = append(*cells, tableCell{rowKey{m.name, exp, corr, sev, metric}, v})
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
				return fmt.Errorf("%s UCE: %w", m.name, err)
			}
			set(ExpAleatoric, "uce", v)
		}
		// A pool without both classes (no sky in the frames) has no area.
		if v, err := a.sky.AUC(); err == nil {
			set(ExpSky, "auc", v)
		}
		if v, err := a.sky.AUPR(); err == nil {
			set(ExpSky, "aupr", v)
		}
		if a.skyN > 0 {
			set(ExpSky, "sky_all", a.skyAll/float64(a.skyN))
		}
		if clean {
			dc := &w.dc[mi]
			if v, err := dc.AUC(); err == nil {
				*cells = append(*cells, tableCell{rowKey{m.name, ExpDatasetChange, CorrClean, 0, "auc"}, v})
			}
			if v, err := dc.AUPR(); err == nil {
				*cells = append(*cells, tableCell{rowKey{m.name, ExpDatasetChange, CorrClean, 0, "aupr"}, v})
			}
			dc.Release() // complete after the clean condition: free its pixels
		}
	}
	return nil
}
