package protocol

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/pkg/nn"
)

// maxDepth is the depth networks' output bound and the AuxUE's depth divisor.
const maxDepth = 80

// depthModel wraps a depth network with in-process forward passes and the
// two training-free probes (dropout injection, flip-consistency gradient),
// through the network's hooks (Encode, Decode with a bottleneck hook,
// DecoderFeatures, HeadBackward).
type depthModel struct {
	net  *depthnet.Net
	w, h int
	x    *tensor.Dense // (1,3,H,W) normalized image
	dz   *tensor.Dense

	drop            *nn.Dropout
	zbuf, flip, ref []float32
}

func newDepthModel(net *depthnet.Net, w, h int) *depthModel {
	return &depthModel{net: net, w: w, h: h, x: nn.NewDense(1, 3, h, w), dz: nn.NewDense(1, 1, h, w),
		zbuf: make([]float32, w*h), flip: make([]float32, 3*w*h), ref: make([]float32, w*h)}
}

// depthCacheKey names what decides a trained depth network's weights.
type depthCacheKey struct {
	W, H, Drives, FramesPerDrive int
	TrainSeed                    int64
	Main                         Main
	Seed                         int64
}

// loadOrTrainDepth returns the reference network (when cfg.Main.Reference
// exists) for seed < 0, else a network trained with cfg.Main's budget and
// weight/data seed, cached under cacheDir. A training splits its
// convolutions across convWorkers goroutines (depthtrain.TrainConfig.ConvWorkers).
func loadOrTrainDepth(ctx context.Context, cfg *Config, seed int64, useReference bool, cacheDir string, convWorkers int, log *slog.Logger) (*depthnet.Net, string, error) {
	d := cfg.Data
	if useReference && cfg.Main.Reference != "" && fileExists(cfg.Main.Reference) {
		net, err := depthnet.New(depthnet.DefaultConfig())
		if err != nil {
			return nil, "", err
		}
		if _, err := nn.LoadCheckpointFile(cfg.Main.Reference, net.Params()); err != nil {
			return nil, "", fmt.Errorf("main model: %w", err)
		}
		return net, "reference " + cfg.Main.Reference, nil
	}
	key := depthCacheKey{W: d.Width, H: d.Height, Drives: d.Drives, FramesPerDrive: d.FramesPerDrive,
		TrainSeed: d.TrainSeed, Main: cfg.Main, Seed: seed}
	key.Main.Reference = ""
	path := filepath.Join(cacheDir, fmt.Sprintf("depth-s%d-%s.ckpt", seed, hashOf(key)))
	ncfg := depthnet.Config{Height: d.Height, MaxDepth: maxDepth, Width: 1, Seed: uint64(seed)}
	if fileExists(path) {
		net, err := depthnet.New(ncfg)
		if err != nil {
			return nil, "", err
		}
		if _, err := nn.LoadCheckpointFile(path, net.Params()); err != nil {
			return nil, "", fmt.Errorf("cached depth model: %w", err)
		}
		return net, "cached " + path, nil
	}
	log.Info("eval: training a depth network", "seed", seed, "steps", cfg.Main.Steps)
	net, st, err := depthtrain.Train(ctx, depthtrain.TrainConfig{Net: ncfg, Seed: seed + d.TrainSeed,
		Drives: d.Drives, FramesPerDrive: d.FramesPerDrive, ValFrames: 2, ValDrives: 1, ValEvery: cfg.Main.Steps,
		Width: d.Width, Height: d.Height, Steps: cfg.Main.Steps, Batch: cfg.Main.Batch, CropWidth: cfg.Main.CropWidth,
		LR: cfg.Main.LR, Log: log, ConvWorkers: convWorkers})
	if err != nil {
		return nil, "", fmt.Errorf("train depth seed %d: %w", seed, err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, "", fmt.Errorf("create cache %q: %w", cacheDir, err)
	}
	if err := nn.SaveCheckpointFile(path, net.Params(), map[string]string{"seed": fmt.Sprint(seed),
		"val_absrel": fmt.Sprint(st.ValAbsRel)}); err != nil {
		return nil, "", err
	}
	// Evaluate a fresh copy read back from the checkpoint, as a cached network
	// is: the trained layers keep their training-batch activations and
	// gradients (about 100 MB per network at 4 x 192x256 crops).
	fresh, err := depthnet.New(ncfg)
	if err != nil {
		return nil, "", err
	}
	if _, err := nn.LoadCheckpointFile(path, fresh.Params()); err != nil {
		return nil, "", fmt.Errorf("trained depth model: %w", err)
	}
	return fresh, fmt.Sprintf("trained %d steps in %s", st.Steps, st.Duration.Round(1e9)), nil
}

// setImage normalizes an RGB8 frame into the model's input (optionally mirrored).
func (m *depthModel) setImage(rgb []uint8, flip bool) {
	depthtrain.NormalizeRGB(rgb, m.w, m.h, 0, m.w, flip, nn.Data(m.x))
}

// image is the normalized (3,H,W) input of the last setImage.
func (m *depthModel) image() []float32 { return nn.Data(m.x) }

// predict writes the depth of the last setImage into dst.
func (m *depthModel) predict(dst []float32) error {
	z, err := m.net.Forward(m.x, nn.Eval)
	if err != nil {
		return err
	}
	m.net.Depth(nn.Data(z), dst)
	return nil
}

// forward runs the network on the last setImage; with drop it applies
// dropout (Monte-Carlo mode) to the bottleneck. It returns the logits.
func (m *depthModel) forward(mode nn.Mode, drop bool) (*tensor.Dense, error) {
	if err := m.net.Encode(m.x, mode); err != nil {
		return nil, err
	}
	return m.decode(mode, drop)
}

// decode runs the decoder and head on the outputs of the last Encode
// (dropout at the bottleneck leaves them unchanged, so the dropout samples
// share one encoder pass).
func (m *depthModel) decode(mode nn.Mode, drop bool) (*tensor.Dense, error) {
	var hook depthnet.Bottleneck
	if drop {
		hook = func(e4 *tensor.Dense) (*tensor.Dense, error) { return m.drop.Forward(e4, nn.MonteCarlo) }
	}
	return m.net.Decode(mode, hook)
}

// decoderChannels is the width of the last decoder features.
func (m *depthModel) decoderChannels() int { return m.net.Head.Params()[0].Value.Shape()[1] }

// predictFeatures writes the depth of the last setImage into dst and, when
// feats is non-nil, the last decoder features (C,H/2,W/2) into feats.
func (m *depthModel) predictFeatures(dst, feats []float32) error {
	z, err := m.forward(nn.Eval, false)
	if err != nil {
		return err
	}
	m.net.Depth(nn.Data(z), dst)
	if feats != nil {
		copy(feats, nn.Data(m.net.DecoderFeatures()))
	}
	return nil
}

// injectVariance runs samples forward passes with dropout p injected at the
// bottleneck of the trained network (training-free "inject" dropout, Mi et
// al. 2022) and writes the per-pixel variance of the depth into dst.
func (m *depthModel) injectVariance(samples int, p float64, rng *rand.Rand, dst []float32) error {
	m.drop = nn.NewDropout(float32(p), rng)
	hw := m.w * m.h
	mean := make([]float64, hw)
	sq := make([]float64, hw)
	if err := m.net.Encode(m.x, nn.Eval); err != nil {
		return fmt.Errorf("inject dropout: %w", err)
	}
	for s := 0; s < samples; s++ {
		z, err := m.decode(nn.Eval, true)
		if err != nil {
			return fmt.Errorf("inject dropout: %w", err)
		}
		m.net.Depth(nn.Data(z), m.zbuf)
		for i, v := range m.zbuf {
			mean[i] += float64(v)
			sq[i] += float64(v) * float64(v)
		}
	}
	for i := range dst {
		mu := mean[i] / float64(samples)
		dst[i] = float32(math.Max(sq[i]/float64(samples)-mu*mu, 0))
	}
	return nil
}

// gradientScore is a training-free gradient score in the spirit of Hornauer
// and Belagiannis (2022): the auxiliary loss 1/2 ||z - flip(z(flip x))||^2
// between the logits of the image and of its mirror image is
// back-propagated to the last decoder features; the per-pixel L2 norm of
// that gradient (half resolution, replicated 2x2) is the score. rgb is the
// frame of the last setImage, which is restored on return.
func (m *depthModel) gradientScore(rgb []uint8, dst []float32) error {
	W, H := m.w, m.h
	m.setImage(rgb, true)
	z, err := m.forward(nn.Eval, false)
	if err != nil {
		return fmt.Errorf("gradient score: %w", err)
	}
	zf := nn.Data(z)
	for v := 0; v < H; v++ {
		for u := 0; u < W; u++ {
			m.ref[v*W+u] = zf[v*W+W-1-u]
		}
	}
	m.setImage(rgb, false)
	if z, err = m.forward(nn.Train, false); err != nil {
		return fmt.Errorf("gradient score: %w", err)
	}
	g := nn.Data(m.dz)
	for i, v := range nn.Data(z) {
		g[i] = v - m.ref[i]
	}
	nn.ZeroGrad(m.net.Params())
	gd, err := m.net.HeadBackward(m.dz)
	if err != nil {
		return fmt.Errorf("gradient score: %w", err)
	}
	s := gd.Shape()
	c, h2, w2 := s[1], s[2], s[3]
	gdat := nn.Data(gd)
	for v := 0; v < h2; v++ {
		for u := 0; u < w2; u++ {
			var sum float64
			for k := 0; k < c; k++ {
				x := float64(gdat[(k*h2+v)*w2+u])
				sum += x * x
			}
			val := float32(math.Sqrt(sum))
			for dv := 0; dv < 2 && 2*v+dv < H; dv++ {
				for du := 0; du < 2 && 2*u+du < W; du++ {
					dst[(2*v+dv)*W+2*u+du] = val
				}
			}
		}
	}
	return nil
}
