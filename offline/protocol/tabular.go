package protocol

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/pkg/nn"
)

// Tabular example of supplementary A.2, on a synthetic stand-in for the red
// wine quality table (1599 rows, 11 positive physico-chemical features, a
// quality score): 11 log-normal features driven by 4 latent factors, each
// with its own typical magnitude (0.5 .. 50), and a target that is a smooth
// nonlinear function of the log-features plus N(0, 0.6^2) noise (the paper's
// MSE is about 0.65). Splits 72/8/20 %. Two OOD copies of the test split:
// every feature negated, and each row's feature values shuffled across the
// columns. Inputs are standardized with the training statistics.
const (
	tabFeatures = 11
	tabLatent   = 4
)

type tabSet struct {
	x []float32 // n x tabFeatures
	y []float32
}

func (s tabSet) n() int { return len(s.y) }

func makeTabular(rows int, rng *rand.Rand) (train, val, test tabSet) {
	var mix [tabFeatures][tabLatent]float64
	var mag, w [tabFeatures]float64
	for j := range mix {
		for k := range mix[j] {
			mix[j][k] = rng.NormFloat64() / math.Sqrt(tabLatent)
		}
		mag[j] = 0.5 * math.Pow(100, rng.Float64())
		w[j] = rng.NormFloat64() * 0.6
	}
	all := tabSet{x: make([]float32, rows*tabFeatures), y: make([]float32, rows)}
	for i := 0; i < rows; i++ {
		var u [tabLatent]float64
		for k := range u {
			u[k] = rng.NormFloat64()
		}
		y := 5.6
		for j := 0; j < tabFeatures; j++ {
			var z float64
			for k := range u {
				z += mix[j][k] * u[k]
			}
			z = 0.4*z + 0.1*rng.NormFloat64()
			all.x[i*tabFeatures+j] = float32(mag[j] * math.Exp(z))
			y += w[j] * z
		}
		y += 0.5*math.Sin(2*u[0]) + 0.3*u[1]*u[2] + 0.6*rng.NormFloat64()
		all.y[i] = float32(y)
	}
	nTr, nVal := rows*72/100, rows*8/100
	cut := func(a, b int) tabSet {
		return tabSet{x: all.x[a*tabFeatures : b*tabFeatures], y: all.y[a:b]}
	}
	return cut(0, nTr), cut(nTr, nTr+nVal), cut(nTr+nVal, rows)
}

// standardize returns (x - mean)/std with the training statistics.
func standardize(train tabSet, sets ...[]float32) [][]float32 {
	var mean, std [tabFeatures]float64
	n := float64(train.n())
	for i := 0; i < train.n(); i++ {
		for j := 0; j < tabFeatures; j++ {
			mean[j] += float64(train.x[i*tabFeatures+j]) / n
		}
	}
	for i := 0; i < train.n(); i++ {
		for j := 0; j < tabFeatures; j++ {
			d := float64(train.x[i*tabFeatures+j]) - mean[j]
			std[j] += d * d / n
		}
	}
	out := make([][]float32, len(sets))
	for s, x := range sets {
		o := make([]float32, len(x))
		for i := range o {
			j := i % tabFeatures
			o[i] = float32((float64(x[i]) - mean[j]) / math.Sqrt(std[j]+1e-12))
		}
		out[s] = o
	}
	return out
}

// tabMLP is the main model of A.2: 11 -> 16 -> 32 -> 16 -> 1, ReLU.
func tabMLP(rng *rand.Rand) *nn.Sequential {
	return &nn.Sequential{Layers: []nn.Layer{
		nn.NewLinear(tabFeatures, 16, rng), &nn.ReLU{}, nn.NewLinear(16, 32, rng), &nn.ReLU{},
		nn.NewLinear(32, 16, rng), &nn.ReLU{}, nn.NewLinear(16, 1, rng)}}
}

func trainTabMLP(ctx context.Context, x, y []float32, epochs int, seed uint64) (*nn.Sequential, error) {
	rng := rand.New(rand.NewPCG(seed, 0x746162))
	net := tabMLP(rng)
	params := net.Params()
	opt := nn.NewAdam(params, nn.AdamConfig{})
	n := len(y)
	const B = 64
	order := rng.Perm(n)
	xb, dy := nn.NewDense(B, tabFeatures), nn.NewDense(B, 1)
	for ep := 0; ep < epochs; ep++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		for k := 0; k+B <= n; k += B {
			xs := nn.Data(xb)
			for b := 0; b < B; b++ {
				copy(xs[b*tabFeatures:(b+1)*tabFeatures], x[order[k+b]*tabFeatures:(order[k+b]+1)*tabFeatures])
			}
			nn.ZeroGrad(params)
			out, err := net.Forward(xb, nn.Train)
			if err != nil {
				return nil, err
			}
			g := nn.Data(dy)
			for b, v := range nn.Data(out) {
				g[b] = 2 * (v - y[order[k+b]]) / B // d mean((f - y)^2)
			}
			if _, err := net.Backward(dy); err != nil {
				return nil, err
			}
			if err := opt.Step(1e-3); err != nil {
				return nil, err
			}
		}
	}
	return net, nil
}

func tabPredict(net *nn.Sequential, x []float32) ([]float32, error) {
	n := len(x) / tabFeatures
	in := nn.NewDense(n, tabFeatures)
	copy(nn.Data(in), x)
	out, err := net.Forward(in, nn.Eval)
	if err != nil {
		return nil, err
	}
	return append([]float32(nil), nn.Data(out)...), nil
}

// The OOD copies of the tabular test split, as the corruption of its rows.
const (
	TabNegated  = "negated"  // every feature negated
	TabShuffled = "shuffled" // each row's values shuffled across the features
)

// binaryAreas is the AUC and AUPR of in-distribution scores (negative)
// against OOD scores (positive).
func binaryAreas(id, ood []float32) (auc, aupr float64, err error) {
	var b metrics.BinaryScores
	for _, part := range []struct {
		s   []float32
		pos bool
	}{{id, false}, {ood, true}} {
		for _, v := range part.s {
			if err := b.Add(v, part.pos); err != nil {
				return 0, 0, err
			}
		}
	}
	if auc, err = b.AUC(); err != nil {
		return 0, 0, err
	}
	aupr, err = b.AUPR()
	return auc, aupr, err
}

func mse(p, y []float32) float64 {
	var s float64
	for i := range y {
		d := float64(p[i] - y[i])
		s += d * d
	}
	return s / float64(len(y))
}

// runTabular trains, per seed, the main MLP, the AuxUE (Laplace + DIDO, K = 5,
// lambda = 1e-4, on the standardized features, as in A.2) and an ensemble of
// three MLPs, and scores ID test rows (negative) against both OOD copies
// (positive).
func runTabular(ctx context.Context, c *Config, tab *table) error {
	for si, s := range c.Seeds {
		rng := rand.New(rand.NewPCG(uint64(s), 0x7461626c65))
		train, _, test := makeTabular(c.Tabular.Rows, rng)
		neg := make([]float32, len(test.x))
		shuf := make([]float32, len(test.x))
		for i := range test.x {
			neg[i] = -test.x[i]
		}
		copy(shuf, test.x)
		for i := 0; i < test.n(); i++ {
			row := shuf[i*tabFeatures : (i+1)*tabFeatures]
			rng.Shuffle(tabFeatures, func(a, b int) { row[a], row[b] = row[b], row[a] })
		}
		z := standardize(train, train.x, test.x, neg, shuf)
		xtr, xte, xneg, xshuf := z[0], z[1], z[2], z[3]
		ood := append(append([]float32(nil), xneg...), xshuf...)

		var members [][]float32
		var oodMembers [][]float32
		var main *nn.Sequential
		for j := 0; j < 3; j++ {
			net, err := trainTabMLP(ctx, xtr, train.y, c.Tabular.MainEpochs, uint64(100*s+j))
			if err != nil {
				return fmt.Errorf("tabular mlp: %w", err)
			}
			if j == 0 {
				main = net
			}
			p, err := tabPredict(net, xte)
			if err != nil {
				return err
			}
			q, err := tabPredict(net, ood)
			if err != nil {
				return err
			}
			members, oodMembers = append(members, p), append(oodMembers, q)
		}
		ensMean := make([]float32, test.n())
		for i := range ensMean {
			ensMean[i] = (members[0][i] + members[1][i] + members[2][i]) / 3
		}
		variance := func(ms [][]float32, i int) float32 {
			mu := (ms[0][i] + ms[1][i] + ms[2][i]) / 3
			var v float32
			for _, m := range ms {
				v += (m[i] - mu) * (m[i] - mu)
			}
			return v / 3
		}
		// Scores per OOD copy: rows [0, n) of ood are the negated test rows,
		// [n, 2n) the shuffled ones; "clean" pools both (the paper's table).
		n := test.n()
		ensID, ensOOD := make([]float32, n), make([]float32, 2*n)
		for i := range ensID {
			ensID[i] = variance(members, i)
		}
		for i := range ensOOD {
			ensOOD[i] = variance(oodMembers, i)
		}
		// AuxUE on the main MLP's training errors.
		ptr, err := tabPredict(main, xtr)
		if err != nil {
			return err
		}
		errs := make([]float32, train.n())
		for i := range errs {
			errs[i] = float32(math.Abs(float64(ptr[i] - train.y[i])))
		}
		const K = 5
		disc, err := auxue.NewDiscretizer(K)
		if err != nil {
			return err
		}
		bins := make([]int32, train.n())
		if _, err := disc.Dataset(errs, nil, bins); err != nil {
			return err
		}
		aux, err := auxue.NewModel(auxue.Config{Form: auxue.FormVector, In: tabFeatures, EncoderWidth: 16, Hidden: 300,
			Aleatoric: auxue.AleatoricLoss{Kind: auxue.Laplace}, K: K, Lambda: 1e-4, Seed: uint64(s)})
		if err != nil {
			return err
		}
		params := auxParams(aux)
		opt := nn.NewAdam(params, nn.AdamConfig{})
		const B = 64
		xb := nn.NewDense(B, tabFeatures)
		eb, bb := make([]float32, B), make([]int32, B)
		arng := rand.New(rand.NewPCG(uint64(s), 0x617578))
		order := arng.Perm(train.n())
		for ep := 0; ep < c.Tabular.AuxEpochs; ep++ {
			arng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for k := 0; k+B <= len(order); k += B {
				xs := nn.Data(xb)
				for b := 0; b < B; b++ {
					r := order[k+b]
					copy(xs[b*tabFeatures:(b+1)*tabFeatures], xtr[r*tabFeatures:(r+1)*tabFeatures])
					eb[b], bb[b] = errs[r], bins[r]
				}
				nn.ZeroGrad(params)
				if _, err := aux.Step(xb, eb, nil, bb); err != nil {
					return fmt.Errorf("tabular auxue: %w", err)
				}
				if err := opt.Step(1e-3); err != nil {
					return err
				}
			}
		}
		var p auxue.Prediction
		didoScore := func(x []float32) ([]float32, error) {
			in := nn.NewDense(len(x)/tabFeatures, tabFeatures)
			copy(nn.Data(in), x)
			if err := aux.Predict(in, 0.9, &p); err != nil {
				return nil, err
			}
			return append([]float32(nil), p.Epistemic...), nil
		}
		didoID, err := didoScore(xte)
		if err != nil {
			return err
		}
		didoOOD, err := didoScore(ood)
		if err != nil {
			return err
		}
		set := func(m, corr, metric string, v float64) {
			tab.set(rowKey{m, ExpTabular, corr, 0, metric}, si, v)
		}
		set("dido", CorrClean, "mse", mse(members[0], test.y))
		set(MethodEnsemble, CorrClean, "mse", mse(ensMean, test.y))
		for _, part := range []struct {
			corr   string
			lo, hi int
		}{{CorrClean, 0, 2 * n}, {TabNegated, 0, n}, {TabShuffled, n, 2 * n}} {
			for _, x := range []struct {
				name    string
				id, ood []float32
			}{{"dido", didoID, didoOOD}, {MethodEnsemble, ensID, ensOOD}} {
				auc, aupr, err := binaryAreas(x.id, x.ood[part.lo:part.hi])
				if err != nil {
					return fmt.Errorf("tabular %s %s: %w", x.name, part.corr, err)
				}
				set(x.name, part.corr, "auc", auc)
				set(x.name, part.corr, "aupr", aupr)
			}
		}
	}
	return nil
}
