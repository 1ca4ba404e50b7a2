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

// convTile is the number of output positions one work unit covers: 8 panels
// of the tile kernel, and a multiple of the dot kernel's step.
const convTile = 8 * tileCols

// convQBlock is the length of the pixel runs the weight-gradient dot kernel
// sums over at a time: 4 rows of the output gradient and the input windows of
// one (channel, kernel row) stay in L1, one block of every row in L2.
const convQBlock = 1024

// Conv2d is a 2-D convolution on NCHW tensors. Weight has shape (Out, In, K, K);
// Bias (Out) is nil when Config.Bias is false. The work is spread across a
// per-layer pool of GOMAXPROCS goroutines and ends in the micro-kernels of
// kernel.go (AVX2+FMA on amd64, NEON on arm64, Go elsewhere).
//
// Stride 1 (any kernel, padding, dilation) is an implicit GEMM: the input is
// copied once per Forward into a zero-padded buffer whose rows all have the
// same pitch P ≥ W + 2·pad, so that the input value under kernel tap (kh, kw)
// of output position q = oh·P + ow is at q + kh·d·P + kw·d of its channel's
// plane. Row (c, kh, kw) of the patch matrix is then a window of the padded
// plane, and the tile kernel reads it in place through an offset table: no
// im2col. Positions with ow ≥ Wo are computed and dropped (2/162 at
// 160-wide 3x3 layers). The input gradient is the same kernel on the output
// gradient padded by d(K−1) − pad, with the taps flipped; the weight gradient
// is dW[o, (c,kh,kw)] = Σ_q dY[o, q] · Xpad[c, q + kh·d·P + kw·d], sums of
// products of contiguous rows (the dot kernel), with the output gradient in
// the same pitch and zero in the dropped columns.
//
// Other strides unfold tiles of 192 output pixels (im2col) and multiply them
// with the same kernels; the input gradient is Wᵀ·dY per tile folded back
// (col2im), split by (image, channel group) so that col2im never races.
type Conv2d struct {
	Config       Conv2dConfig
	Weight, Bias *Param

	x        []float32
	n, h, w  int
	ho, wo   int
	out, dx  *tensor.Dense
	have     bool
	dy       []float32
	pool     *workerPool
	portable bool // use the Go kernels even where the assembly ones run (tests)

	geo            convGeometry
	wPack, wtPack  []float32 // weights as 4-row panels: forward, input gradient
	fwdOffs        rowOffsets
	bwdOffs        rowOffsets
	xp, dyp        []float32 // stride 1: padded input and output gradient
	biasSums       []float32 // stride 1: per (image, output channel) sums of dY
	workers        []convWorker
	wGradUnits     int // stride 1: weight-gradient units (blocks of 3 patch rows)
	inputGradUnits int
}

// convGeometry is what a Forward derives from the input shape.
type convGeometry struct {
	cfg             Conv2dConfig
	n, h, w, ho, wo int
	direct          bool // stride 1: implicit GEMM on padded buffers
	// direct path
	pitch         int // row pitch P of both padded buffers
	planeX, imgX  int // padded input: channel plane and image strides
	planeY, imgY  int // padded output gradient
	padY          int // its padding d(K−1) − pad
	qOut, qIn     int // positions per image: Ho·P (output), H·P (input gradient)
	tilesOut      int // forward units per image
	tilesIn       int // input-gradient units per image
	dotLen        int // weight-gradient positions per image, a multiple of 8
	xpLen, dypLen int
	// im2col path
	tiles int // units per image, of convTile output pixels
}

// convWorker is one worker's scratch.
type convWorker struct {
	cTile        []float32 // tile results (rows × convTile)
	cols         []float32 // im2col tile (ckk × convTile)
	wGrad, bGrad []float32 // im2col path: partial gradients
	edge         []float32 // im2col path: dY columns of a last, narrow panel (Out × 24)
	sums         [dotRows * dotCols]float32
	colsOffs     rowOffsets // l·convTile
	edgeOffs     rowOffsets // l·24
	dyOffs       rowOffsets // l·Ho·Wo
}

// Work passes run by the worker pool.
const (
	opPadInput = iota
	opForward
	opPadGrad
	opWeightGrad
	opInputGrad
)

func (c *Conv2d) runTiles(op, w, lo, hi int) {
	switch op {
	case opPadInput:
		c.padInput(lo, hi)
	case opForward:
		if c.geo.direct {
			c.forwardDirect(w, lo, hi)
		} else {
			c.forwardIm2col(w, lo, hi)
		}
	case opPadGrad:
		c.padGrad(lo, hi)
	case opWeightGrad:
		if c.geo.direct {
			c.weightGradDirect(w, lo, hi)
		} else {
			c.weightGradIm2col(w, lo, hi)
		}
	case opInputGrad:
		if c.geo.direct {
			c.inputGradDirect(w, lo, hi)
		} else {
			c.inputGradIm2col(w, lo, hi)
		}
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

// prepare sizes the buffers for an n × In × h × w input (a no-op while the
// shape and the configuration stay the same) and starts the worker pool.
func (c *Conv2d) prepare(n, h, w, ho, wo int) {
	if c.pool == nil {
		c.pool = newWorkerPool(workers())
		runtime.AddCleanup(c, (*workerPool).close, c.pool)
	}
	g := c.Config
	k, d, p := g.Kernel, g.Dilation, g.Padding
	ckk := g.In * k * k
	geo := convGeometry{cfg: g, n: n, h: h, w: w, ho: ho, wo: wo, direct: g.Stride == 1}
	if geo.direct {
		span := d * (k - 1)
		geo.padY = span - p
		geo.pitch = w + max(2*p, span)
		geo.planeX = (h + 2*p) * geo.pitch
		geo.imgX = g.In * geo.planeX
		// 8 zeros after each plane: the dot kernel's last run may read them.
		geo.planeY = (ho+2*geo.padY)*geo.pitch + dotStep
		geo.imgY = roundUp(g.Out, dotRows) * geo.planeY
		geo.qOut, geo.qIn = ho*geo.pitch, h*geo.pitch
		geo.tilesOut = (geo.qOut + convTile - 1) / convTile
		geo.tilesIn = (geo.qIn + convTile - 1) / convTile
		geo.dotLen = roundUp(geo.qOut, dotStep)
		// Tiles read up to 23 positions past their last one, the dot kernel up
		// to 7, each plus the largest tap offset: slack after the last image.
		slack := span*geo.pitch + span + convTile
		geo.xpLen = n*geo.imgX + slack
		geo.dypLen = n*geo.imgY + slack
	} else {
		geo.tiles = (ho*wo + convTile - 1) / convTile
	}
	if geo == c.geo && len(c.workers) == c.pool.size && len(c.wPack) == roundUp(g.Out, tileRows)*ckk {
		return
	}
	c.geo = geo
	c.wPack = make([]float32, roundUp(g.Out, tileRows)*ckk)
	fwd := make([]int, ckk)
	if geo.direct {
		c.xp = make([]float32, geo.xpLen)
		c.dyp, c.biasSums = nil, nil // made by the first Backward (inference never needs them)
		c.wtPack = make([]float32, roundUp(g.In, tileRows)*g.Out*k*k)
		bwd := make([]int, g.Out*k*k)
		for ch := 0; ch < g.In; ch++ {
			for kh := 0; kh < k; kh++ {
				for kw := 0; kw < k; kw++ {
					fwd[(ch*k+kh)*k+kw] = ch*geo.planeX + kh*d*geo.pitch + kw*d
				}
			}
		}
		for o := 0; o < g.Out; o++ {
			for kh := 0; kh < k; kh++ {
				for kw := 0; kw < k; kw++ {
					bwd[(o*k+kh)*k+kw] = o*geo.planeY + (k-1-kh)*d*geo.pitch + (k-1-kw)*d
				}
			}
		}
		c.bwdOffs.set(bwd)
		c.wGradUnits = (ckk + dotCols - 1) / dotCols
		c.inputGradUnits = n * geo.tilesIn
	} else {
		c.xp, c.dyp, c.biasSums = nil, nil, nil
		c.wtPack = make([]float32, roundUp(ckk, tileRows)*g.Out)
		for r := range fwd {
			fwd[r] = r * convTile
		}
		c.inputGradUnits = n * c.channelGroups(c.pool.size)
	}
	c.fwdOffs.set(fwd)
	c.workers = make([]convWorker, c.pool.size)
	for i := range c.workers {
		wk := &c.workers[i]
		if geo.direct {
			wk.cTile = make([]float32, roundUp(max(g.In, g.Out), tileRows)*convTile)
			continue
		}
		wk.cTile = make([]float32, max(roundUp(ckk, tileRows)+2*tileRows, roundUp(g.Out, tileRows))*convTile)
		wk.cols = make([]float32, ckk*convTile)
		wk.wGrad = make([]float32, g.Out*ckk)
		wk.bGrad = make([]float32, g.Out)
		wk.edge = make([]float32, g.Out*tileCols)
		wk.colsOffs.strided(ckk, convTile)
		wk.edgeOffs.strided(g.Out, tileCols)
		wk.dyOffs.strided(g.Out, ho*wo)
	}
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
	c.prepare(c.n, c.h, c.w, ho, wo)
	ckk := g.In * g.Kernel * g.Kernel
	// The weights change between steps: pack them once per pass, not per tile.
	packA(c.wPack, false, Data(c.Weight.Value), ckk, 0, g.Out, 0, ckk)
	if c.geo.direct {
		c.pool.run(c, opPadInput, c.n*g.In)
		c.pool.run(c, opForward, c.n*c.geo.tilesOut)
	} else {
		c.pool.run(c, opForward, c.n*c.geo.tiles)
	}
	return y, nil
}

// padInput copies channel planes [lo, hi) (image-major) of x into the padded
// buffer; the padding was zeroed when the buffer was made and is never written.
func (c *Conv2d) padInput(lo, hi int) {
	g, geo := c.Config, &c.geo
	hw := c.h * c.w
	for u := lo; u < hi; u++ {
		n, ch := u/g.In, u%g.In
		src := c.x[u*hw : (u+1)*hw]
		dst := c.xp[n*geo.imgX+ch*geo.planeX+g.Padding*geo.pitch+g.Padding:]
		for ih := 0; ih < c.h; ih++ {
			copy(dst[ih*geo.pitch:ih*geo.pitch+c.w], src[ih*c.w:(ih+1)*c.w])
		}
	}
}

// forwardDirect computes output-position tiles [lo, hi) (image-major) of the
// stride-1 convolution into the worker's tile buffer and copies the valid
// columns out, adding the bias.
func (c *Conv2d) forwardDirect(w, lo, hi int) {
	g, geo := c.Config, &c.geo
	ckk := g.In * g.Kernel * g.Kernel
	P := c.ho * c.wo
	ys := Data(c.out)
	var bias []float32
	if c.Bias != nil {
		bias = Data(c.Bias.Value)
	}
	ct := c.workers[w].cTile
	for u := lo; u < hi; u++ {
		n, t := u/geo.tilesOut, u%geo.tilesOut
		q0 := t * convTile
		q1 := min(q0+convTile, geo.qOut)
		xn := c.xp[n*geo.imgX+q0:]
		for jr := 0; jr < q1-q0; jr += tileCols {
			for ib := 0; ib < g.Out; ib += tileRows {
				tile(c.portable, ckk, c.wPack[ib*ckk:], xn[jr:], &c.fwdOffs, ct[ib*convTile+jr:], convTile, false)
			}
		}
		c.copyOut(ct, g.Out, q0, q1, ys[n*g.Out*P:], c.ho, c.wo, bias)
	}
}

// copyOut writes the valid columns (ow < wo) of positions [q0, q1) of a tile
// of rows channels (pitch layout) into dst (rows × ho × wo), plus bias[row]
// when bias is not nil.
func (c *Conv2d) copyOut(ct []float32, rows, q0, q1 int, dst []float32, ho, wo int, bias []float32) {
	pitch := c.geo.pitch
	for q := q0; q < q1; {
		oh, ow := q/pitch, q%pitch
		end := min(q1, (oh+1)*pitch)
		if ow < wo && oh < ho {
			vEnd := min(end, oh*pitch+wo)
			for r := 0; r < rows; r++ {
				src := ct[r*convTile+q-q0 : r*convTile+vEnd-q0]
				out := dst[(r*ho+oh)*wo+ow : (r*ho+oh)*wo+ow+len(src)]
				if bias == nil {
					copy(out, src)
					continue
				}
				b := bias[r]
				for i, v := range src {
					out[i] = v + b
				}
			}
		}
		q = end
	}
}

// forwardIm2col computes tiles [lo, hi) of output pixels of a strided
// convolution: im2col, then the tile kernel on the patch rows.
func (c *Conv2d) forwardIm2col(w, lo, hi int) {
	g := c.Config
	ckk := g.In * g.Kernel * g.Kernel
	P := c.ho * c.wo
	ys := Data(c.out)
	var bias []float32
	if c.Bias != nil {
		bias = Data(c.Bias.Value)
	}
	wk := &c.workers[w]
	for u := lo; u < hi; u++ {
		n, j0, j1 := c.im2colTile(u)
		c.im2col(c.x[n*g.In*c.h*c.w:(n+1)*g.In*c.h*c.w], j0, j1, wk.cols)
		for jr := 0; jr < j1-j0; jr += tileCols {
			for ib := 0; ib < g.Out; ib += tileRows {
				tile(c.portable, ckk, c.wPack[ib*ckk:], wk.cols[jr:], &c.fwdOffs, wk.cTile[ib*convTile+jr:], convTile, false)
			}
		}
		yn := ys[n*g.Out*P : (n+1)*g.Out*P]
		for o := 0; o < g.Out; o++ {
			src := wk.cTile[o*convTile : o*convTile+j1-j0]
			out := yn[o*P+j0 : o*P+j1]
			if bias == nil {
				copy(out, src)
				continue
			}
			for i, v := range src {
				out[i] = v + bias[o]
			}
		}
	}
}

// im2colTile returns image n and the output-pixel range [j0, j1) of unit u
// of the im2col path.
func (c *Conv2d) im2colTile(u int) (n, j0, j1 int) {
	n, t := u/c.geo.tiles, u%c.geo.tiles
	j0 = t * convTile
	return n, j0, min(j0+convTile, c.ho*c.wo)
}

// im2col writes the patch matrix of output pixels [j0, j1) of one image into
// buf (row stride convTile), row (c, kh, kw), column j − j0, zero where the
// patch reads padding.
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

// col2im adds the patch-matrix tile buf (row stride convTile) of nch channels
// back into the image gradient img (which starts at the first of those
// channels): the adjoint of im2col.
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

// patches walks the patch matrix of output pixels [j0, j1) of nch channels of
// one image in runs: for every patch row (c, kh, kw) and output row segment it
// calls visit(run, pix, stride) where run is the slice of buf (row stride
// convTile) for that segment and pix starts at the image pixel of the run's
// first element (stride apart), or nil where the run lies in the zero
// padding. Runs are split at the padding borders so that visit needs no
// bounds checks.
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
				row := buf[r*convTile : r*convTile+cw]
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
	defer func() { c.dy = nil }() // do not keep the caller's gradient alive
	ckk := g.In * g.Kernel * g.Kernel
	dx := reuse(&c.dx, c.n, g.In, c.h, c.w)
	wg := Data(c.Weight.Grad)
	if c.geo.direct {
		if len(c.dyp) != c.geo.dypLen {
			c.dyp = make([]float32, c.geo.dypLen)
			c.biasSums = make([]float32, c.n*g.Out)
		}
		k := g.Kernel
		// wtPack: panels over input channels, columns (o, kh, kw); the taps are
		// flipped through bwdOffs.
		wt := Data(c.Weight.Value)
		for cb := 0; cb < g.In; cb += tileRows {
			panel := c.wtPack[cb*g.Out*k*k : (cb+tileRows)*g.Out*k*k]
			for o := 0; o < g.Out; o++ {
				for t := 0; t < k*k; t++ {
					l := o*k*k + t
					for i := 0; i < tileRows; i++ {
						v := float32(0)
						if cb+i < g.In {
							v = wt[(o*g.In+cb+i)*k*k+t]
						}
						panel[l*tileRows+i] = v
					}
				}
			}
		}
		c.pool.run(c, opPadGrad, c.n*g.Out)
		c.pool.run(c, opWeightGrad, c.wGradUnits)
		c.pool.run(c, opInputGrad, c.inputGradUnits)
		if c.Bias != nil {
			bg := Data(c.Bias.Grad)
			for i, v := range c.biasSums {
				bg[i%g.Out] += v
			}
		}
		return dx, nil
	}
	packA(c.wtPack, true, Data(c.Weight.Value), ckk, 0, ckk, 0, g.Out)
	units := c.n * c.geo.tiles
	used := min(c.pool.size, units)
	for w := 0; w < used; w++ {
		clear32(c.workers[w].wGrad)
		clear32(c.workers[w].bGrad)
	}
	c.pool.run(c, opWeightGrad, units)
	for w := 0; w < used; w++ {
		for i, v := range c.workers[w].wGrad {
			wg[i] += v
		}
	}
	if c.Bias != nil {
		bg := Data(c.Bias.Grad)
		for w := 0; w < used; w++ {
			for i, v := range c.workers[w].bGrad {
				bg[i] += v
			}
		}
	}
	clear32(Data(dx))
	c.pool.run(c, opInputGrad, c.inputGradUnits)
	return dx, nil
}

// padGrad copies output-gradient planes [lo, hi) (image-major) into the
// padded buffer and sums each plane for the bias gradient.
func (c *Conv2d) padGrad(lo, hi int) {
	geo := &c.geo
	g := c.Config
	P := c.ho * c.wo
	for u := lo; u < hi; u++ {
		n, o := u/g.Out, u%g.Out
		src := c.dy[u*P : (u+1)*P]
		dst := c.dyp[n*geo.imgY+o*geo.planeY+geo.padY*geo.pitch+geo.padY:]
		var s float32
		for oh := 0; oh < c.ho; oh++ {
			row := src[oh*c.wo : (oh+1)*c.wo]
			copy(dst[oh*geo.pitch:oh*geo.pitch+c.wo], row)
			for _, v := range row {
				s += v
			}
		}
		c.biasSums[u] = s
	}
}

// weightGradDirect accumulates dW[:, r] for the patch rows r in blocks
// [lo, hi) of 3: per image, per run of convQBlock positions, per block of 4
// output channels, the dot kernel on the padded output gradient and the
// windows of the padded input.
func (c *Conv2d) weightGradDirect(w, lo, hi int) {
	g, geo := c.Config, &c.geo
	ckk := g.In * g.Kernel * g.Kernel
	wg := Data(c.Weight.Grad)
	offs := c.fwdOffs.offs
	base := geo.padY*geo.pitch + geo.padY
	wk := &c.workers[w]
	var a [dotRows][]float32
	var b [dotCols][]float32
	for n := 0; n < c.n; n++ {
		dyn := c.dyp[n*geo.imgY+base:]
		xn := c.xp[n*geo.imgX:]
		for q0 := 0; q0 < geo.dotLen; q0 += convQBlock {
			q1 := min(q0+convQBlock, geo.dotLen)
			for ob := 0; ob < g.Out; ob += dotRows {
				for i := range a {
					// Rows past Out read the zero planes of the padded buffer.
					a[i] = dyn[(ob+i)*geo.planeY+q0 : (ob+i)*geo.planeY+q1]
				}
				for rb := lo; rb < hi; rb++ {
					r0 := rb * dotCols
					for j := range b {
						r := min(r0+j, ckk-1) // past the last row: repeat it, drop the sums
						b[j] = xn[offs[r]+q0 : offs[r]+q1]
					}
					dot(c.portable, (q1-q0)/dotStep, &a, &b, &wk.sums)
					for i := 0; i < dotRows && ob+i < g.Out; i++ {
						row := wg[(ob+i)*ckk:]
						for j := 0; j < dotCols && r0+j < ckk; j++ {
							row[r0+j] += wk.sums[i*dotCols+j]
						}
					}
				}
			}
		}
	}
}

// inputGradDirect computes input-position tiles [lo, hi) (image-major) of dx:
// the tile kernel on the padded output gradient with flipped taps.
func (c *Conv2d) inputGradDirect(w, lo, hi int) {
	g, geo := c.Config, &c.geo
	k := g.Kernel
	K := g.Out * k * k
	dxs := Data(c.dx)
	ct := c.workers[w].cTile
	for u := lo; u < hi; u++ {
		n, t := u/geo.tilesIn, u%geo.tilesIn
		q0 := t * convTile
		q1 := min(q0+convTile, geo.qIn)
		dyn := c.dyp[n*geo.imgY+q0:]
		for jr := 0; jr < q1-q0; jr += tileCols {
			for cb := 0; cb < g.In; cb += tileRows {
				tile(c.portable, K, c.wtPack[cb*K:], dyn[jr:], &c.bwdOffs, ct[cb*convTile+jr:], convTile, false)
			}
		}
		c.copyOut(ct, g.In, q0, q1, dxs[n*g.In*c.h*c.w:], c.h, c.w, nil)
	}
}

func (c *Conv2d) weightGradIm2col(w, lo, hi int) {
	g := c.Config
	ckk := g.In * g.Kernel * g.Kernel
	P := c.ho * c.wo
	wk := &c.workers[w]
	var a [dotRows][]float32
	var b [dotCols][]float32
	for u := lo; u < hi; u++ {
		n, j0, j1 := c.im2colTile(u)
		cw := j1 - j0
		n8 := cw / dotStep * dotStep
		c.im2col(c.x[n*g.In*c.h*c.w:(n+1)*g.In*c.h*c.w], j0, j1, wk.cols)
		dyn := c.dy[n*g.Out*P : (n+1)*g.Out*P]
		for ob := 0; ob < g.Out; ob += dotRows {
			for i := range a {
				o := min(ob+i, g.Out-1) // past the last channel: repeat it, drop the sums
				a[i] = dyn[o*P+j0 : o*P+j1]
			}
			for r0 := 0; r0 < ckk; r0 += dotCols {
				for j := range b {
					r := min(r0+j, ckk-1)
					b[j] = wk.cols[r*convTile : r*convTile+cw]
				}
				dot(c.portable, n8/dotStep, &a, &b, &wk.sums)
				for i := 0; i < dotRows && ob+i < g.Out; i++ {
					row := wk.wGrad[(ob+i)*ckk:]
					for j := 0; j < dotCols && r0+j < ckk; j++ {
						s := wk.sums[i*dotCols+j]
						for t := n8; t < cw; t++ { // the last < 8 pixels
							s += a[i][t] * b[j][t]
						}
						row[r0+j] += s
					}
				}
			}
		}
		if c.Bias != nil {
			for o := range wk.bGrad {
				var s float32
				for _, v := range dyn[o*P+j0 : o*P+j1] {
					s += v
				}
				wk.bGrad[o] += s
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

// inputGradIm2col computes units [lo, hi) of (image, channel group): per tile
// of output pixels, the group's patch rows of Wᵀ·dY, folded back by col2im.
func (c *Conv2d) inputGradIm2col(w, lo, hi int) {
	g := c.Config
	kk := g.Kernel * g.Kernel
	P, HW := c.ho*c.wo, c.h*c.w
	groups := c.inputGradUnits / c.n
	dxs := Data(c.dx)
	wk := &c.workers[w]
	for u := lo; u < hi; u++ {
		n, grp := u/groups, u%groups
		c0, c1 := grp*g.In/groups, (grp+1)*g.In/groups
		rLo, rHi := c0*kk, c1*kk
		rb0 := rLo / tileRows * tileRows // first row of the first panel
		dyn := c.dy[n*g.Out*P : (n+1)*g.Out*P]
		for j0 := 0; j0 < P; j0 += convTile {
			j1 := min(j0+convTile, P)
			for jr := 0; jr < j1-j0; jr += tileCols {
				bp, offs := dyn[j0+jr:], &wk.dyOffs
				if nr := j1 - j0 - jr; nr < tileCols {
					// Narrow last panel: copy its columns, zero-padded to 24.
					for o := 0; o < g.Out; o++ {
						row := wk.edge[o*tileCols : (o+1)*tileCols]
						copy(row, dyn[o*P+j0+jr:o*P+j0+jr+nr])
						clear32(row[nr:])
					}
					bp, offs = wk.edge, &wk.edgeOffs
				}
				for rb := rb0; rb < rHi; rb += tileRows {
					tile(c.portable, g.Out, c.wtPack[rb*g.Out:], bp, offs, wk.cTile[(rb-rb0)*convTile+jr:], convTile, false)
				}
			}
			c.col2im(dxs[(n*g.In+c0)*HW:(n*g.In+c1)*HW], c1-c0, j0, j1, wk.cTile[(rLo-rb0)*convTile:])
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
