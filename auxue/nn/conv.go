package nn

import (
	"fmt"
	"math/rand/v2"
	"runtime"

	"gorgonia.org/tensor"
)

// Conv2dConfig describes a square-kernel 2-D convolution (cross-correlation,
// as in PyTorch and ONNX Conv) with symmetric zero padding.
type Conv2dConfig struct {
	In, Out  int // channels
	Kernel   int // kernel height and width
	Stride   int // 0 means 1
	Padding  int // zero padding on every side
	Dilation int // 0 means 1
	Bias     bool
}

// OutputSize returns the output height and width for an h x w input:
// ⌊(h + 2p − d(k−1) − 1)/s⌋ + 1.
func (c Conv2dConfig) OutputSize(h, w int) (int, int) {
	span := c.Dilation*(c.Kernel-1) + 1
	return (h+2*c.Padding-span)/c.Stride + 1, (w+2*c.Padding-span)/c.Stride + 1
}

func (c Conv2dConfig) validate() error {
	switch {
	case c.In < 1 || c.Out < 1:
		return fmt.Errorf("conv2d: channels in %d, out %d must be positive", c.In, c.Out)
	case c.Kernel < 1:
		return fmt.Errorf("conv2d: kernel %d must be positive", c.Kernel)
	case c.Stride < 1:
		return fmt.Errorf("conv2d: stride %d must be positive", c.Stride)
	case c.Dilation < 1:
		return fmt.Errorf("conv2d: dilation %d must be positive", c.Dilation)
	case c.Padding < 0:
		return fmt.Errorf("conv2d: padding %d must not be negative", c.Padding)
	case c.Padding >= c.Dilation*(c.Kernel-1)+1:
		return fmt.Errorf("conv2d: padding %d must be smaller than the dilated kernel extent %d", c.Padding, c.Dilation*(c.Kernel-1)+1)
	}
	return nil
}

// convChunk is the number of output pixels one im2col tile covers; with
// gemmTileCols it keeps each GEMM call serial and its B panel in L2.
const convChunk = gemmTileCols

// Conv2d is a 2-D convolution on NCHW tensors, computed per tile of output
// pixels as im2col followed by a float32 GEMM (the packed AVX2+FMA kernel on
// amd64, gonum's kernel elsewhere), with the tiles spread across a per-layer
// pool of GOMAXPROCS goroutines. Weight has shape (Out, In, K, K); Bias (Out)
// is nil when Config.Bias is false.
type Conv2d struct {
	Config       Conv2dConfig
	Weight, Bias *Param

	x          []float32
	n, h, w    int
	ho, wo     int
	out, dx    *tensor.Dense
	scratch    [][]float32   // per worker: one im2col tile
	wGrad      [][]float32   // per worker: partial weight gradient
	bGrad      [][]float32   // per worker: partial bias gradient
	gs         []gemmScratch // per worker: GEMM packing buffers
	have       bool
	dy         []float32
	chunksPerN int
	pool       *workerPool
	portable   bool // use gonum's GEMM kernel even where the AVX2 one runs (tests)
}

// Work passes run by the worker pool.
const (
	opForward = iota
	opWeightGrad
	opInputGrad
)

func (c *Conv2d) runTiles(op, w, lo, hi int) {
	switch op {
	case opForward:
		c.forwardTiles(w, lo, hi)
	case opWeightGrad:
		c.weightGradTiles(w, lo, hi)
	case opInputGrad:
		c.inputGradUnits(w, lo, hi)
	}
}

// NewConv2d validates cfg and returns a convolution with Kaiming-uniform
// weights (fan-in In·K·K) drawn from rng and zero bias. A nil rng uses a fixed
// seed. Zero Stride and Dilation are stored as 1.
func NewConv2d(cfg Conv2dConfig, rng *rand.Rand) (*Conv2d, error) {
	if cfg.Stride == 0 {
		cfg.Stride = 1
	}
	if cfg.Dilation == 0 {
		cfg.Dilation = 1
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	k := cfg.Kernel
	c := &Conv2d{Config: cfg, Weight: newParam("weight", cfg.Out, cfg.In, k, k)}
	kaimingUniform(Data(c.Weight.Value), cfg.In*k*k, orDefault(rng))
	if cfg.Bias {
		c.Bias = newParam("bias", cfg.Out)
	}
	return c, nil
}

func (c *Conv2d) name() string {
	g := c.Config
	return fmt.Sprintf("Conv2d(%d->%d, k=%d, s=%d, p=%d, d=%d)", g.In, g.Out, g.Kernel, g.Stride, g.Padding, g.Dilation)
}

// ensureScratch sizes the per-worker buffers and starts the worker pool; it
// returns the number of workers.
func (c *Conv2d) ensureScratch() int {
	if c.pool == nil {
		c.pool = newWorkerPool(workers())
		runtime.AddCleanup(c, (*workerPool).close, c.pool)
	}
	nw := c.pool.size
	g := c.Config
	ckk := g.In * g.Kernel * g.Kernel
	if len(c.scratch) > 0 && (len(c.scratch[0]) != ckk*convChunk || len(c.wGrad[0]) != g.Out*ckk) {
		c.scratch, c.wGrad, c.bGrad = nil, nil, nil // configuration changed
	}
	for len(c.scratch) < nw {
		c.scratch = append(c.scratch, make([]float32, ckk*convChunk))
		c.wGrad = append(c.wGrad, make([]float32, g.Out*ckk))
		c.bGrad = append(c.bGrad, make([]float32, g.Out))
	}
	for len(c.gs) < nw {
		c.gs = append(c.gs, gemmScratch{portable: c.portable})
	}
	return nw
}

// Forward convolves x (N, In, H, W) into (N, Out, Ho, Wo). The returned tensor
// is owned by the layer and overwritten by the next Forward.
func (c *Conv2d) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	xs, err := checkInput(c, x, 4)
	if err != nil {
		return nil, err
	}
	g := c.Config
	if err := g.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.name(), err)
	}
	if err := checkParam(c, c.Weight, g.Out, g.In, g.Kernel, g.Kernel); err != nil {
		return nil, err
	}
	if g.Bias != (c.Bias != nil) {
		return nil, fmt.Errorf("%s: Config.Bias is %v but the Bias parameter is %v", c.name(), g.Bias, c.Bias)
	}
	if c.Bias != nil {
		if err := checkParam(c, c.Bias, g.Out); err != nil {
			return nil, err
		}
	}
	sh := x.Shape()
	if sh[1] != g.In {
		return nil, fmt.Errorf("%s: input shape %v has %d channels, want %d", c.name(), sh, sh[1], g.In)
	}
	ho, wo := g.OutputSize(sh[2], sh[3])
	if ho < 1 || wo < 1 {
		return nil, fmt.Errorf("%s: input %dx%d is smaller than the dilated kernel", c.name(), sh[2], sh[3])
	}
	c.x, c.n, c.h, c.w, c.ho, c.wo, c.have = xs, sh[0], sh[2], sh[3], ho, wo, true
	y := reuse(&c.out, c.n, g.Out, ho, wo)
	c.ensureScratch()
	c.chunksPerN = (ho*wo + convChunk - 1) / convChunk
	c.pool.run(c, opForward, c.n*c.chunksPerN)
	return y, nil
}

// tile returns image n and the output-pixel range [j0, j1) of work unit u.
func (c *Conv2d) tile(u int) (n, j0, j1 int) {
	n, t := u/c.chunksPerN, u%c.chunksPerN
	j0 = t * convChunk
	return n, j0, min(j0+convChunk, c.ho*c.wo)
}

func (c *Conv2d) forwardTiles(w, lo, hi int) {
	g := c.Config
	ckk := g.In * g.Kernel * g.Kernel
	P := c.ho * c.wo
	ys, wts := Data(c.out), Data(c.Weight.Value)
	var bias []float32
	if c.Bias != nil {
		bias = Data(c.Bias.Value)
	}
	buf := c.scratch[w]
	for u := lo; u < hi; u++ {
		n, j0, j1 := c.tile(u)
		cw := j1 - j0
		c.im2col(c.x[n*g.In*c.h*c.w:(n+1)*g.In*c.h*c.w], j0, j1, buf[:ckk*cw])
		yn := ys[n*g.Out*P : (n+1)*g.Out*P]
		gemm(&c.gs[w], false, false, g.Out, cw, ckk, wts, ckk, buf, cw, yn[j0:], P, false)
		for o, b := range bias {
			row := yn[o*P+j0 : o*P+j1]
			for j := range row {
				row[j] += b
			}
		}
	}
}

// im2col writes the patch matrix of output pixels [j0, j1) of one image into
// buf, row (c, kh, kw), column j − j0, zero where the patch reads padding.
func (c *Conv2d) im2col(img []float32, j0, j1 int, buf []float32) {
	c.patches(c.Config.In, j0, j1, func(row []float32, src []float32, stride int) {
		if src == nil {
			clear32(row)
			return
		}
		if stride == 1 {
			copy(row, src[:len(row)])
			return
		}
		for i := range row {
			row[i] = src[i*stride]
		}
	}, img, buf)
}

// col2im adds the patch-matrix tile buf of nch channels back into the image
// gradient img (which starts at the first of those channels): the adjoint of
// im2col.
func (c *Conv2d) col2im(img []float32, nch, j0, j1 int, buf []float32) {
	c.patches(nch, j0, j1, func(row []float32, dst []float32, stride int) {
		if dst == nil {
			return
		}
		if stride == 1 {
			dst = dst[:len(row)]
			for i, v := range row {
				dst[i] += v
			}
			return
		}
		for i, v := range row {
			dst[i*stride] += v
		}
	}, img, buf)
}

// patches walks the patch matrix of output pixels [j0, j1) of nch channels of one image in
// runs: for every patch row (c, kh, kw) and output row segment it calls
// visit(run, pix, stride) where run is the slice of buf for that segment and
// pix starts at the image pixel of the run's first element (stride apart), or
// nil where the run lies in the zero padding. Runs are split at the padding
// borders so that visit needs no bounds checks.
func (c *Conv2d) patches(nch, j0, j1 int, visit func(run, pix []float32, stride int), img, buf []float32) {
	g := c.Config
	k, s, p, d := g.Kernel, g.Stride, g.Padding, g.Dilation
	cw := j1 - j0
	H, W, Wo := c.h, c.w, c.wo
	for ch := 0; ch < nch; ch++ {
		plane := img[ch*H*W : (ch+1)*H*W]
		for kh := 0; kh < k; kh++ {
			for kw := 0; kw < k; kw++ {
				r := (ch*k+kh)*k + kw
				row := buf[r*cw : (r+1)*cw]
				offW := kw*d - p
				// Output columns whose input column ow*s + offW lies in [0, W).
				owLo := 0
				if offW < 0 {
					owLo = (-offW + s - 1) / s
				}
				owHi := (W - 1 - offW) / s // inclusive
				if W-1-offW < 0 {
					owHi = -1
				}
				for j := j0; j < j1; {
					oh, ow := j/Wo, j%Wo
					end := min(j1, (oh+1)*Wo) // end of this output row within the tile
					seg := row[j-j0 : end-j0]
					owEnd := ow + len(seg)
					ih := oh*s - p + kh*d
					if ih < 0 || ih >= H {
						visit(seg, nil, s)
						j = end
						continue
					}
					line := plane[ih*W : (ih+1)*W]
					a := min(max(owLo, ow), owEnd) // first valid output column
					b := min(max(owHi+1, a), owEnd)
					if a > ow {
						visit(seg[:a-ow], nil, s)
					}
					if b > a {
						visit(seg[a-ow:b-ow], line[a*s+offW:], s)
					}
					if owEnd > b {
						visit(seg[b-ow:], nil, s)
					}
					j = end
				}
			}
		}
	}
}

// Backward accumulates the weight (and bias) gradient and returns dL/dx.
func (c *Conv2d) Backward(dy *tensor.Dense) (*tensor.Dense, error) {
	var shape tensor.Shape
	if c.out != nil {
		shape = c.out.Shape()
	}
	gs, err := checkGrad(c, dy, shape, c.have)
	if err != nil {
		return nil, err
	}
	g := c.Config
	c.dy = gs
	nw := c.ensureScratch()
	used := min(nw, c.n*c.chunksPerN)
	for w := 0; w < used; w++ {
		clear32(c.wGrad[w])
		clear32(c.bGrad[w])
	}
	c.pool.run(c, opWeightGrad, c.n*c.chunksPerN)
	wg := Data(c.Weight.Grad)
	for w := 0; w < used; w++ {
		for i, v := range c.wGrad[w] {
			wg[i] += v
		}
	}
	if c.Bias != nil {
		bg := Data(c.Bias.Grad)
		for w := 0; w < used; w++ {
			for i, v := range c.bGrad[w] {
				bg[i] += v
			}
		}
	}
	dx := reuse(&c.dx, c.n, g.In, c.h, c.w)
	clear32(Data(dx))
	c.pool.run(c, opInputGrad, c.n*c.channelGroups(nw))
	c.dy = nil // do not keep the caller's gradient alive
	return dx, nil
}

func (c *Conv2d) weightGradTiles(w, lo, hi int) {
	g := c.Config
	ckk := g.In * g.Kernel * g.Kernel
	P := c.ho * c.wo
	buf, wg, bg := c.scratch[w], c.wGrad[w], c.bGrad[w]
	for u := lo; u < hi; u++ {
		n, j0, j1 := c.tile(u)
		cw := j1 - j0
		c.im2col(c.x[n*g.In*c.h*c.w:(n+1)*g.In*c.h*c.w], j0, j1, buf[:ckk*cw])
		dyn := c.dy[n*g.Out*P : (n+1)*g.Out*P]
		gemm(&c.gs[w], false, true, g.Out, ckk, cw, dyn[j0:], P, buf, cw, wg, ckk, true)
		if c.Bias != nil {
			for o := range bg {
				var s float32
				for _, v := range dyn[o*P+j0 : o*P+j1] {
					s += v
				}
				bg[o] += s
			}
		}
	}
}

// channelGroups splits the input channels so that the input-gradient pass has
// a race-free unit of work per (image, channel group) even for a batch of one:
// col2im of one channel only writes that channel's plane.
func (c *Conv2d) channelGroups(nw int) int {
	if c.n >= 2*nw {
		return 1
	}
	return min(c.Config.In, nw)
}

func (c *Conv2d) inputGradUnits(w, lo, hi int) {
	g := c.Config
	kk := g.Kernel * g.Kernel
	ckk := g.In * kk
	P, HW := c.ho*c.wo, c.h*c.w
	groups := c.channelGroups(c.pool.size)
	buf, wts, dxs := c.scratch[w], Data(c.Weight.Value), Data(c.dx)
	for u := lo; u < hi; u++ {
		n, grp := u/groups, u%groups
		c0, c1 := grp*g.In/groups, (grp+1)*g.In/groups
		dyn := c.dy[n*g.Out*P : (n+1)*g.Out*P]
		for j0 := 0; j0 < P; j0 += convChunk {
			j1 := min(j0+convChunk, P)
			cw := j1 - j0
			rows := (c1 - c0) * kk
			// dcols[c0·kk : c1·kk, j0:j1] = W[:, c0·kk : c1·kk]ᵀ · dy[:, j0:j1]
			gemm(&c.gs[w], true, false, rows, cw, g.Out, wts[c0*kk:], ckk, dyn[j0:], P, buf, cw, false)
			c.col2im(dxs[(n*g.In+c0)*HW:(n*g.In+c1)*HW], c1-c0, j0, j1, buf[:rows*cw])
		}
	}
}

// Params returns the weight and, when configured, the bias.
func (c *Conv2d) Params() []*Param {
	if c.Bias != nil {
		return []*Param{c.Weight, c.Bias}
	}
	return []*Param{c.Weight}
}
