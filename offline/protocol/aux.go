package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/pkg/nn"
)

// auxVariant is one generalized AuxUE trained on the frozen main model.
type auxVariant struct {
	Head        string // laplace, gaussian, ggau, nig
	Shared      bool
	K           int
	Lambda      float64
	UnlabeledKL float64 // DIDO regularizer weight on pixels without ground truth
	Categorical bool    // softmax cross-entropy over the K bins instead of DIDO
	// Bands > 0 gives sigma_Theta2 the banded global context and Outliers
	// the fraction of layout outliers in training (the reference recipe,
	// docs/training.md); both 0 for the strict eq. 4 variant.
	Bands    int
	Outliers float64
}

func (v auxVariant) id() string {
	enc := "sep"
	if v.Shared {
		enc = "shared"
	}
	s := fmt.Sprintf("%s_%s_k%d_l%s", v.Head, enc, v.K, strconv.FormatFloat(v.Lambda, 'g', -1, 64))
	if v.UnlabeledKL != 0 {
		s += "_u" + strconv.FormatFloat(v.UnlabeledKL, 'g', -1, 64)
	}
	if v.Categorical {
		s += "_cat"
	}
	if v.Bands > 0 {
		s += fmt.Sprintf("_gc%d", v.Bands)
	}
	if v.Outliers > 0 {
		s += "_o" + strconv.FormatFloat(v.Outliers, 'g', -1, 64)
	}
	return s
}

// auxMethod is a method read out of an AuxUE variant.
type auxMethod struct {
	name      string
	variant   int  // index into the variants
	epistemic bool // K/S (or entropy for categorical) instead of the aleatoric scale
}

// auxPlan lists the variants to train and the methods read from them.
func auxPlan(c *Config) ([]auxVariant, []auxMethod) {
	var vs []auxVariant
	var ms []auxMethod
	add := func(v auxVariant) int {
		for i, w := range vs {
			if w == v {
				return i
			}
		}
		vs = append(vs, v)
		return len(vs) - 1
	}
	a := c.AuxUE
	u, gb, out := a.UnlabeledKL, a.GlobalContextBands, a.Outliers
	for _, enc := range a.Encoders {
		for _, h := range a.Heads {
			i := add(auxVariant{Head: h, Shared: enc == "shared", K: a.K, Lambda: a.Lambda, UnlabeledKL: u, Bands: gb, Outliers: out})
			short := map[string]string{"separate": "sep", "shared": "shared"}[enc]
			ms = append(ms, auxMethod{name: h + "_" + short, variant: i})
			if h == "laplace" {
				ms = append(ms, auxMethod{name: "dido_" + short, variant: i, epistemic: true})
			}
		}
	}
	if u > 0 || gb > 0 || out > 0 {
		// The strict reading of eq. 4 (labeled pixels only, local features) beside it.
		i := add(auxVariant{Head: "laplace", K: a.K, Lambda: a.Lambda})
		ms = append(ms, auxMethod{name: MethodDIDOLabeledOnly, variant: i, epistemic: true})
	}
	if a.Categorical {
		i := add(auxVariant{Head: "laplace", K: a.K, Lambda: a.Lambda, Categorical: true, Bands: gb, Outliers: out})
		ms = append(ms, auxMethod{name: "categorical", variant: i, epistemic: true})
	}
	for _, k := range c.Ablations.K {
		i := add(auxVariant{Head: "laplace", K: k, Lambda: a.Lambda, UnlabeledKL: u, Bands: gb, Outliers: out})
		ms = append(ms, auxMethod{name: fmt.Sprintf("dido_k%d", k), variant: i, epistemic: true})
	}
	for _, l := range c.Ablations.Lambda {
		i := add(auxVariant{Head: "laplace", K: a.K, Lambda: l, UnlabeledKL: u, Bands: gb, Outliers: out})
		ms = append(ms, auxMethod{name: "dido_lambda" + strconv.FormatFloat(l, 'g', -1, 64), variant: i, epistemic: true})
	}
	return vs, ms
}

// auxData is the AuxUE training set of one seed: features on the block grid
// of auxue.factor (RGB + depth/80 [+ row]), block errors |d - y| and
// validity, as depthnet.AuxTrain builds them.
type auxData struct {
	n, gh, gw int
	ch        int // input channels
	feats     []float32
	errs      []float32
	valid     []bool
	bins      map[int][]int32 // per K, per-image equal-frequency bins
}

func buildAuxData(ctx context.Context, c *Config, dm *depthModel, seed int64) (*auxData, error) {
	d := c.Data
	src, err := depthtrain.NewSimSource(d.TrainSeed+c.Main.Seed, d.Drives, d.FramesPerDrive, d.Width, d.Height)
	if err != nil {
		return nil, err
	}
	f := c.AuxUE.Factor
	n, gh, gw := c.AuxUE.Frames, d.Height/f, d.Width/f
	ghw := gh * gw
	ch, in := auxInputChannels(c, dm), c.auxInputs()
	ad := &auxData{n: n, gh: gh, gw: gw, ch: ch, feats: make([]float32, n*ch*ghw),
		errs: make([]float32, n*ghw), valid: make([]bool, n*ghw), bins: map[int][]int32{}}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x657661))
	depth := make([]float32, d.Width*d.Height)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fr, err := src.Sample(rng)
		if err != nil {
			return nil, err
		}
		dm.setImage(fr.RGB, false)
		x := ad.feats[i*ch*ghw : (i+1)*ch*ghw]
		var dec []float32
		if in.decoder {
			dec = x[in.content()*ghw:]
		}
		if err := dm.predictFeatures(depth, dec); err != nil {
			return nil, err
		}
		auxFeatures(dm.image(), depth, d.Height, d.Width, f, in.row, x[:in.content()*ghw])
		blockErrors(depth, fr.Sparse, d.Height, d.Width, f, ad.errs[i*ghw:(i+1)*ghw], ad.valid[i*ghw:(i+1)*ghw])
	}
	return ad, nil
}

func (ad *auxData) binsFor(k int) ([]int32, error) {
	if b, ok := ad.bins[k]; ok {
		return b, nil
	}
	disc, err := auxue.NewDiscretizer(k)
	if err != nil {
		return nil, err
	}
	b := make([]int32, len(ad.errs))
	if err := disc.PerImage(ad.errs, ad.valid, ad.n, ad.gh*ad.gw, b); err != nil {
		return nil, err
	}
	ad.bins[k] = b
	return b, nil
}

// auxInputChannels is the AuxUE input width for the config's inputs.
func auxInputChannels(c *Config, dm *depthModel) int {
	in := c.auxInputs()
	if in.decoder {
		return in.content() + dm.decoderChannels()
	}
	return in.content()
}

// auxInputs is the parsed auxue.inputs of a validated config.
func (c *Config) auxInputs() auxInputs {
	in, _ := parseAuxInputs(c.AuxUE.Inputs) // Config.check rejected a bad value
	return in
}

func newAuxModel(c *Config, v auxVariant, in int, seed int64) (*auxue.Model, error) {
	kind, err := auxue.ParseAleatoricKind(v.Head)
	if err != nil {
		return nil, err
	}
	return auxue.NewModel(auxue.Config{Form: auxue.FormDense, In: in,
		EncoderWidth: c.AuxUE.EncoderWidth, SharedEncoder: v.Shared, Hidden: c.AuxUE.Hidden,
		Aleatoric: auxue.AleatoricLoss{Kind: kind}, K: v.K, Lambda: v.Lambda, UnlabeledKL: v.UnlabeledKL,
		GlobalContext: v.Bands > 0, GlobalContextBands: v.Bands, Seed: uint64(seed)})
}

func auxParams(m *auxue.Model) []*nn.Param {
	named := m.Params()
	ps := make([]*nn.Param, len(named))
	for i, p := range named {
		ps[i] = p.Param
	}
	return ps
}

// auxCheckpointParams are handles on the same tensors named by their model
// paths (the layers' own names repeat).
func auxCheckpointParams(m *auxue.Model) []*nn.Param {
	named := m.Params()
	ps := make([]*nn.Param, len(named))
	for i, p := range named {
		ps[i] = &nn.Param{Name: p.Name, Value: p.Param.Value, Grad: p.Param.Grad}
	}
	return ps
}

// auxCacheKey names what decides an AuxUE's weights.
type auxCacheKey struct {
	Main                      string
	W, H, Drives, FramesPer   int
	TrainSeed, MainSeed, Seed int64
	Frames, Epochs, Batch     int
	LR, EndLR                 float64
	EncoderWidth, Hidden      int
	Inputs                    string
	Factor                    int
	Variant                   string
}

// loadOrTrainAux trains variant v on ad (or loads it from cacheDir); the
// training's convolutions use convWorkers goroutines (nn.Conv2d.SetWorkers,
// which does not change the weights).
func loadOrTrainAux(ctx context.Context, c *Config, v auxVariant, in int, seed int64, mainID string, ad func() (*auxData, error), cacheDir string, convWorkers int, log *slog.Logger) (*auxue.Model, bool, error) {
	m, err := newAuxModel(c, v, in, seed)
	if err != nil {
		return nil, false, err
	}
	m.SetWorkers(convWorkers)
	a, d := c.AuxUE, c.Data
	key := auxCacheKey{Main: mainID, W: d.Width, H: d.Height, Drives: d.Drives, FramesPer: d.FramesPerDrive,
		TrainSeed: d.TrainSeed, MainSeed: c.Main.Seed, Seed: seed, Frames: a.Frames, Epochs: a.Epochs, Batch: a.Batch,
		LR: a.LR, EndLR: a.EndLR, EncoderWidth: a.EncoderWidth, Hidden: a.Hidden, Inputs: a.Inputs, Factor: a.Factor, Variant: v.id()}
	path := filepath.Join(cacheDir, fmt.Sprintf("auxue-%s-s%d-%s.ckpt", v.id(), seed, hashOf(key)))
	params := auxParams(m)
	if fileExists(path) {
		if _, err := nn.LoadCheckpointFile(path, auxCheckpointParams(m)); err != nil {
			return nil, false, fmt.Errorf("cached auxue %s: %w", v.id(), err)
		}
		return m, true, nil
	}
	data, err := ad()
	if err != nil {
		return nil, false, err
	}
	bins, err := data.binsFor(v.K)
	if err != nil {
		return nil, false, err
	}
	ghw := data.gh * data.gw
	B := a.Batch
	ch := data.ch
	x := nn.NewDense(B, ch, data.gh, data.gw)
	xs := nn.Data(x)
	errs, valid, bb := make([]float32, B*ghw), make([]bool, B*ghw), make([]int32, B*ghw)
	perEpoch := data.n / B
	total := perEpoch * a.Epochs
	opt := nn.NewAdam(params, nn.AdamConfig{})
	rng := rand.New(rand.NewPCG(uint64(seed), 0x617578))
	order := make([]int, data.n)
	for i := range order {
		order[i] = i
	}
	cat := auxue.CategoricalLoss{K: v.K}
	orng := rand.New(rand.NewPCG(uint64(seed), 0x6f75746c))
	kinds := []auxue.OutlierKind{auxue.OutlierFlip, auxue.OutlierTiles}
	scratch := make([]float32, ghw)
	var dRaw, dLog *tensor.Dense
	step := 0
	var last float64
	for ep := 0; ep < a.Epochs; ep++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var sum float64
		for k := 0; k < perEpoch; k++ {
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
			for b := 0; b < B; b++ {
				f := order[k*B+b]
				copy(xs[b*ch*ghw:(b+1)*ch*ghw], data.feats[f*ch*ghw:(f+1)*ch*ghw])
				copy(errs[b*ghw:(b+1)*ghw], data.errs[f*ghw:(f+1)*ghw])
				copy(valid[b*ghw:(b+1)*ghw], data.valid[f*ghw:(f+1)*ghw])
				copy(bb[b*ghw:(b+1)*ghw], bins[f*ghw:(f+1)*ghw])
				auxue.MaybeOutlier(orng, v.Outliers, kinds, xs[b*ch*ghw:(b+1)*ch*ghw], ch, data.gh, data.gw,
					valid[b*ghw:(b+1)*ghw], bb[b*ghw:(b+1)*ghw], scratch)
			}
			nn.ZeroGrad(params)
			raw, logits, err := m.Forward(x, nn.Train)
			if err != nil {
				return nil, false, fmt.Errorf("auxue %s step %d: %w", v.id(), step, err)
			}
			if dRaw == nil {
				dRaw, dLog = nn.NewDense(raw.Shape()...), nn.NewDense(logits.Shape()...)
			}
			la, _, err := m.Config.Aleatoric.Loss(nn.Data(raw), B, ghw, errs, valid, nn.Data(dRaw))
			if err != nil {
				return nil, false, fmt.Errorf("auxue %s step %d: %w", v.id(), step, err)
			}
			var le float64
			if v.Categorical {
				le, _, err = cat.Loss(nn.Data(logits), B, ghw, bb, nn.Data(dLog))
			} else {
				le, _, err = m.DIDO.Loss(nn.Data(logits), B, ghw, bb, nn.Data(dLog))
			}
			if err != nil {
				return nil, false, fmt.Errorf("auxue %s step %d: %w", v.id(), step, err)
			}
			if math.IsNaN(la+le) || math.IsInf(la+le, 0) {
				return nil, false, fmt.Errorf("auxue %s: loss %v at step %d: %w", v.id(), la+le, step, errDiverged)
			}
			if err := m.Backward(dRaw, dLog); err != nil {
				return nil, false, err
			}
			if err := opt.Step(nn.PolyDecay(a.LR, a.EndLR, step, total, 0.9)); err != nil {
				return nil, false, err
			}
			sum += la + le
			step++
		}
		last = sum / float64(max(perEpoch, 1))
		log.Debug("eval: auxue epoch", "variant", v.id(), "seed", seed, "epoch", ep+1, "loss", last)
	}
	log.Debug("eval: trained auxue", "variant", v.id(), "seed", seed, "last_epoch_loss", last)
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, false, fmt.Errorf("create cache %q: %w", cacheDir, err)
	}
	if err := nn.SaveCheckpointFile(path, auxCheckpointParams(m), map[string]string{"variant": v.id(), "seed": fmt.Sprint(seed)}); err != nil {
		return nil, false, err
	}
	// Evaluate a fresh copy read back from the checkpoint, as a cached model
	// is: the trained layers keep their training-batch activations and
	// gradients (48 models of the full protocol hold hundreds of MB).
	fresh, err := newAuxModel(c, v, in, seed)
	if err != nil {
		return nil, false, err
	}
	if _, err := nn.LoadCheckpointFile(path, auxCheckpointParams(fresh)); err != nil {
		return nil, false, fmt.Errorf("trained auxue %s: %w", v.id(), err)
	}
	return fresh, false, nil
}

// auxReadout runs an AuxUE on one frame's features on the f x f block grid
// and writes the aleatoric scale and the epistemic score (K/S, or the
// entropy for the categorical head), each block replicated to full
// resolution.
type auxReadout struct {
	x    *tensor.Dense
	in   auxInputs
	grid []float32
	w, h int
	f    int
}

func newAuxReadout(w, h, f, ch int, in auxInputs) *auxReadout {
	return &auxReadout{x: nn.NewDense(1, ch, h/f, w/f), in: in, grid: make([]float32, (w/f)*(h/f)), w: w, h: h, f: f}
}

// setFeatures builds the input from the normalized image, the depth and
// (for the +decoder inputs) the decoder features.
func (r *auxReadout) setFeatures(img, depth, dec []float32) {
	x := nn.Data(r.x)
	n := r.in.content() * len(r.grid)
	auxFeatures(img, depth, r.h, r.w, r.f, r.in.row, x[:n])
	copy(x[n:], dec)
}

// run makes one forward pass of m and writes the scale into scale and the
// epistemic score into epis (either may be nil).
func (r *auxReadout) run(m *auxue.Model, categorical bool, scale, epis []float32) error {
	raw, logits, err := m.Forward(r.x, nn.Eval)
	if err != nil {
		return err
	}
	ghw := len(r.grid)
	if scale != nil {
		np := m.Config.Aleatoric.Kind.NumParams()
		rd := nn.Data(raw)
		var p [3]float32
		for j := 0; j < ghw; j++ {
			for c := 0; c < np; c++ {
				p[c] = rd[c*ghw+j]
			}
			r.grid[j] = float32(m.Config.Aleatoric.Scale(p[:np]))
		}
		r.upsample(scale)
	}
	if epis != nil {
		if categorical {
			err = auxue.CategoricalLoss{K: m.Config.K}.Entropy(nn.Data(logits), 1, ghw, r.grid)
		} else {
			err = m.DIDO.Epistemic(nn.Data(logits), 1, ghw, r.grid, nil)
		}
		if err != nil {
			return err
		}
		r.upsample(epis)
	}
	return nil
}

func (r *auxReadout) upsample(dst []float32) {
	f, gw := r.f, r.w/r.f
	for v := 0; v < r.h; v++ {
		src := r.grid[(v/f)*gw:]
		row := dst[v*r.w : (v+1)*r.w]
		for u := range row {
			row[u] = src[u/f]
		}
	}
}

// errDiverged marks a training run whose loss became NaN or infinite.
var errDiverged = errors.New("training diverged")

// auxChannels is the AuxUE input: the block means of the normalized RGB and the
// predicted depth / maxDepth (auxue.AuxFeatures).
const auxChannels = 4
