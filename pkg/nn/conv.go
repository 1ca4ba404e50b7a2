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
// one (channel, kernel row) stay in L1, one block of every row in L2. The
// runs also fix the order of the float32 sums (each run's sum is added to
// dW), and with it every trained model: runs of 8192 were 5-10 % faster on
// this pass on Zen 4 but changed the rounding enough to flip the reduced
// evaluation's DIDO-vs-heads check (offline/protocol TestQuickConfig), so the
// order stays that of runs of 1024.
const convQBlock = 1024

// Conv2d is a 2-D convolution on NCHW tensors. Weight has shape (Out, In, K, K);
// Bias (Out) is nil when Config.Bias is false. The work is spread across a
// per-layer pool of GOMAXPROCS goroutines and ends in the micro-kernels of
// kernel.go (AVX2+FMA on amd64, NEON on arm64, Go elsewhere).
//
// Every pass is an implicit GEMM: no patch matrix (im2col) is ever built.
// Forward copies the input once into zero-padded planes whose rows all have
// the same pitch P; with stride s each channel is split into s² phase planes
// (input rows ≡ rh and columns ≡ rw mod s), so that for every kernel tap
// (kh, kw) the input value under output position q = oh·P + ow sits at q plus
// a fixed offset: writing kh·d − pad = s·ah + rh (0 ≤ rh < s),
//
//	offset(c, kh, kw) = plane(c, rh, rw) + (ah + A)·P + (aw + A),
//
// A = ⌈pad/s⌉ being the planes' own padding. Row (c, kh, kw) of the patch
// matrix is then a window of a phase plane, and the tile kernel reads it in
// place through this offset table. Positions with ow ≥ Wo are computed and
// dropped (1/161 to 2/162 of them at the depth network's layers). The bias
// is one more column of the packed weights, read against a row of ones kept
// after each image's planes.
//
// The weight gradient is dW[o, (c,kh,kw)] = Σ_q dY[o, q] · X[q + offset], sums
// of products of contiguous rows (the dot kernel), with dY copied into the
// same pitch, zero in the dropped columns. The input gradient of phase
// (rh, rw) is a stride-1 correlation of the padded dY with the taps that read
// that phase: dX[c, s·i + rh, s·j + rw] = Σ_{o, taps} W[o, c, kh, kw] ·
// dY[o, i − ah, j − aw], the tile kernel again with a per-phase offset table.
type Conv2d struct {
	Config       Conv2dConfig
	Weight, Bias *Param

	srcs     []convSource // the input parts of the current Forward
	srcArr   [2]convSource
	relu     bool // the current Forward writes max(y, 0) (a ReLU after it, fused)
	n, h, w  int
	ho, wo   int
	out, dx  *tensor.Dense
	have     bool
	dy       []float32
	pool     *workerPool
	poolStop runtime.Cleanup // closes pool when the layer is collected
	nWorkers int             // SetWorkers; < 1: GOMAXPROCS
	portable bool            // use the Go kernels even where the assembly ones run (tests)

	geo       convGeometry
	wPack     []float32   // forward: 4-row panels over Out, columns (c, kh, kw)
	phaseW    [][]float32 // input gradient, per phase: 4-row panels over In, columns (o, tap)
	fwdOffs   rowOffsets
	phaseOffs []rowOffsets
	xp, dyp   []float32 // phase planes of the input; padded output gradient
	biasSums  []float32 // per (image, output channel) sums of dY
	workers   []convWorker
}

// convKey is what the geometry depends on.
type convKey struct {
	cfg     Conv2dConfig
	n, h, w int
	workers int
}

// convPhase is one input phase (rows ≡ rh, columns ≡ rw mod stride) of the
// input-gradient pass.
type convPhase struct {
	rh, rw   int
	hph, wph int   // its rows and columns
	taps     []int // the kernel taps kh·K + kw that read it
	tiles    int   // input-gradient units per image
}

// convGeometry is what Forward derives from the input shape (see Conv2d).
type convGeometry struct {
	key            convKey
	ho, wo         int
	a, b           int // padding of the input planes (A) and of dY (B)
	pitch          int
	planeX, imgX   int // input phase planes: plane and image strides
	planeY, imgY   int // padded output gradient
	qOut, tilesOut int // forward positions (Ho·P) and units per image
	ones           int // with bias: offset of the row of ones in each image
	dotLen         int // weight-gradient positions per image, a multiple of 8
	phases         []convPhase
	inUnits        int // input-gradient units per image
	allTaps        bool
	xpLen, dypLen  int
}

// convWorker is one worker's scratch.
type convWorker struct {
	cTile []float32 // tile results (rows × convTile)
	rows  []float32 // interpolated rows of an upsampled input part
	sums  [dotRows * dotCols]float32
	sums6 [2 * dotRows * dotCols]float32
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
		c.padInput(w, lo, hi)
	case opForward:
		c.forwardTiles(w, lo, hi)
	case opPadGrad:
		c.padGrad(lo, hi)
	case opWeightGrad:
		c.weightGrad(w, lo, hi)
	case opInputGrad:
		c.inputGrad(w, lo, hi)
	}
}

// runPass runs pass op over all its units on the worker pool. The grains
// keep the smallest chunks worth a pool hand-off: 8 channel planes for the
// copies (padGrad's groups of planes stay whole), one tile, and two blocks
// of patch rows (one kernelDot6Runs pair) for the weight gradient.
func (c *Conv2d) runPass(op int) {
	g := c.Config
	switch op {
	case opPadInput:
		c.pool.run(c, op, c.n*g.In, 8)
	case opForward:
		c.pool.run(c, op, c.n*c.geo.tilesOut, 1)
	case opPadGrad:
		c.pool.run(c, op, c.n*g.Out, 8)
	case opWeightGrad:
		c.pool.run(c, op, (g.In*g.Kernel*g.Kernel+dotCols-1)/dotCols, 2)
	case opInputGrad:
		c.pool.run(c, op, c.n*c.geo.inUnits, 1)
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

// SetWorkers sets the number of goroutines, the caller's included, that the
// layer's passes are split across; n < 1 means GOMAXPROCS (the default).
// A program that already keeps every core busy with networks of its own,
// one goroutine each, sets 1: a pass then runs on the calling goroutine,
// without the hand-offs and the barrier of the pool. The results do not
// depend on n (every unit of work is computed the same way whoever runs it;
// TestConv2dWorkerCountIndependent).
func (c *Conv2d) SetWorkers(n int) { c.nWorkers = n }

// SetWorkers calls SetWorkers(n) on every Conv2d among layers, looking
// into Sequential containers.
func SetWorkers(n int, layers ...Layer) {
	for _, l := range layers {
		switch l := l.(type) {
		case *Conv2d:
			l.SetWorkers(n)
		case *Sequential:
			if l != nil {
				SetWorkers(n, l.Layers...)
			}
		}
	}
}

// floorDiv is ⌊e/s⌋ for s > 0.
func floorDiv(e, s int) int {
	if e >= 0 {
		return e / s
	}
	return -((-e + s - 1) / s)
}

// tapPhase splits the input offset t·d − pad of kernel tap t into whole
// strides and a phase: t·d − pad = s·a + r, 0 ≤ r < s.
func tapPhase(t int, g Conv2dConfig) (a, r int) {
	e := t*g.Dilation - g.Padding
	a = floorDiv(e, g.Stride)
	return a, e - a*g.Stride
}

// phaseSize is the number of input rows (or columns) ≡ r mod s among n.
func phaseSize(n, r, s int) int {
	if r >= n {
		return 0
	}
	return (n - r + s - 1) / s
}

// prepare sizes the buffers for an n × In × h × w input (a no-op while the
// shape and the configuration stay the same) and starts the worker pool.
func (c *Conv2d) prepare(n, h, w, ho, wo int) {
	size := c.nWorkers
	if size < 1 {
		size = workers()
	}
	if c.pool == nil || c.pool.size != size {
		if c.pool != nil {
			c.poolStop.Stop()
			c.pool.close()
		}
		c.pool = newWorkerPool(size)
		c.poolStop = runtime.AddCleanup(c, (*workerPool).close, c.pool)
	}
	g := c.Config
	key := convKey{cfg: g, n: n, h: h, w: w, workers: c.pool.size}
	if key == c.geo.key && c.xp != nil {
		return
	}
	k, s := g.Kernel, g.Stride
	amin, _ := tapPhase(0, g)
	amax, _ := tapPhase(k-1, g)
	geo := convGeometry{key: key, ho: ho, wo: wo, a: -amin, b: max(amax, 0)}
	A, B := geo.a, geo.b
	hmax, wmax := phaseSize(h, 0, s), phaseSize(w, 0, s)
	geo.pitch = max(wo+amax+A, A+wmax, B+wo, wmax+B-amin)
	rowsX := max(ho+amax+A, A+hmax)
	rowsY := max(B+ho, hmax+B-amin)
	geo.planeX = rowsX * geo.pitch
	geo.imgX = g.In * s * s * geo.planeX
	// After each plane: the dot kernel's last run reads up to B + 7 past the
	// data rows, which must be zeros.
	geo.planeY = rowsY*geo.pitch + B + dotStep
	geo.imgY = roundUp(g.Out, dotRows) * geo.planeY
	geo.qOut = ho * geo.pitch
	if g.Bias {
		// A row of ones after each image's planes: the bias is the last column
		// of the packed weights, so the tile kernel adds it and the copy-out is
		// a plain copy.
		geo.ones = geo.imgX
		geo.imgX += roundUp(geo.qOut, convTile)
	}
	geo.tilesOut = (geo.qOut + convTile - 1) / convTile
	geo.dotLen = roundUp(geo.qOut, dotStep)

	ckk := g.In * k * k
	fwd := make([]int, ckk, ckk+1)
	for ch := 0; ch < g.In; ch++ {
		for kh := 0; kh < k; kh++ {
			ah, rh := tapPhase(kh, g)
			for kw := 0; kw < k; kw++ {
				aw, rw := tapPhase(kw, g)
				fwd[(ch*k+kh)*k+kw] = (ch*s*s+rh*s+rw)*geo.planeX + (ah+A)*geo.pitch + aw + A
			}
		}
	}
	if g.Bias {
		fwd = append(fwd, geo.ones)
	}
	c.fwdOffs.set(fwd)
	// Tiles read up to 23 positions past the last output, plus the largest
	// offset; the dot kernel stays within that.
	geo.xpLen = n*geo.imgX + max(0, c.fwdOffs.max+roundUp(geo.qOut, tileCols)-geo.imgX)

	c.phaseW, c.phaseOffs = nil, nil
	geo.allTaps = true
	tailY := 0
	for rh := 0; rh < s; rh++ {
		for rw := 0; rw < s; rw++ {
			ph := convPhase{rh: rh, rw: rw, hph: phaseSize(h, rh, s), wph: phaseSize(w, rw, s)}
			for kh := 0; kh < k; kh++ {
				for kw := 0; kw < k; kw++ {
					if _, r := tapPhase(kh, g); r != rh {
						continue
					}
					if _, r := tapPhase(kw, g); r != rw {
						continue
					}
					ph.taps = append(ph.taps, kh*k+kw)
				}
			}
			if ph.hph == 0 || ph.wph == 0 {
				continue
			}
			if len(ph.taps) == 0 {
				geo.allTaps = false // these input pixels are under no tap: dX = 0
				continue
			}
			ph.tiles = (ph.hph*geo.pitch + convTile - 1) / convTile
			offs := make([]int, g.Out*len(ph.taps))
			for o := 0; o < g.Out; o++ {
				for ti, t := range ph.taps {
					ah, _ := tapPhase(t/k, g)
					aw, _ := tapPhase(t%k, g)
					offs[o*len(ph.taps)+ti] = o*geo.planeY + (B-ah)*geo.pitch + B - aw
				}
			}
			var ro rowOffsets
			ro.set(offs)
			tailY = max(tailY, ro.max+roundUp(ph.hph*geo.pitch, tileCols)-geo.imgY)
			c.phaseOffs = append(c.phaseOffs, ro)
			c.phaseW = append(c.phaseW, make([]float32, roundUp(g.In, tileRows)*len(offs)))
			geo.phases = append(geo.phases, ph)
			geo.inUnits += ph.tiles
		}
	}
	geo.dypLen = n*geo.imgY + max(0, tailY)
	c.geo = geo
	c.wPack = make([]float32, roundUp(g.Out, tileRows)*len(fwd))
	c.xp = make([]float32, geo.xpLen)
	if g.Bias {
		for n := 0; n < key.n; n++ {
			ones := c.xp[n*geo.imgX+geo.ones : (n+1)*geo.imgX]
			for i := range ones {
				ones[i] = 1
			}
		}
	}
	c.dyp, c.biasSums = nil, nil // made by the first Backward (inference never needs them)
	c.workers = make([]convWorker, c.pool.size)
	for i := range c.workers {
		c.workers[i].cTile = make([]float32, roundUp(max(g.In, g.Out), tileRows)*convTile)
	}
}

// Forward convolves x (N, In, H, W) into (N, Out, Ho, Wo). The returned tensor
// is owned by the layer and overwritten by the next Forward.
func (c *Conv2d) Forward(x *tensor.Dense, mode Mode) (*tensor.Dense, error) {
	in := [1]ConvInput{{X: x}}
	return c.forward(in[:], false)
}

// ConvInput is one part of a convolution's input in Sequential.ForwardConcat:
// the parts are concatenated along the channel axis, in order, and a part
// with Up is first resized by it.
type ConvInput struct {
	X  *tensor.Dense
	Up *Upsample // nil: X as it is
}

// convSource is one input part of the current Forward: channels of the
// layer's input, read from x (N, c, h, w), resized by up when it is set.
type convSource struct {
	x    []float32
	c    int
	h, w int
	up   *Upsample
}

// forward convolves the channel concatenation of parts; with relu it
// writes max(y, 0), the values a ReLU after the layer would compute. A
// part with Up is interpolated by Upsample.plane straight into the padded
// planes, and a plain part is copied there, so neither the resized nor the
// concatenated tensor is ever built: the planes hold the same values
// Forward on that tensor copies into them, and the output is bit-identical.
func (c *Conv2d) forward(parts []ConvInput, relu bool) (*tensor.Dense, error) {
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
	if len(parts) == 0 {
		return nil, fmt.Errorf("%s: no input", c.name())
	}
	c.srcs = c.srcArr[:0]
	var n, h, w, channels int
	for i, p := range parts {
		xs, err := checkInput(c, p.X, 4)
		if err != nil {
			if len(parts) > 1 {
				return nil, fmt.Errorf("input part %d: %w", i, err)
			}
			return nil, err
		}
		sh := p.X.Shape()
		ph, pw := sh[2], sh[3]
		if p.Up != nil {
			if p.Up.Factor < 1 {
				return nil, fmt.Errorf("%s: input part %d: %s: factor must be at least 1", c.name(), i, p.Up.name())
			}
			if g.Stride != 1 {
				return nil, fmt.Errorf("%s: input part %d is resized, which needs stride 1", c.name(), i)
			}
			ph, pw = ph*p.Up.Factor, pw*p.Up.Factor
		}
		if i == 0 {
			n, h, w = sh[0], ph, pw
		} else if sh[0] != n || ph != h || pw != w {
			return nil, fmt.Errorf("%s: input part %d is %dx%dx%d after resizing, part 0 %dx%dx%d", c.name(), i, sh[0], ph, pw, n, h, w)
		}
		c.srcs = append(c.srcs, convSource{x: xs, c: sh[1], h: sh[2], w: sh[3], up: p.Up})
		channels += sh[1]
	}
	if channels != g.In {
		if len(parts) == 1 {
			sh := parts[0].X.Shape()
			return nil, fmt.Errorf("%s: input shape %v has %d channels, want %d", c.name(), sh, sh[1], g.In)
		}
		return nil, fmt.Errorf("%s: input parts have %d channels together, want %d", c.name(), channels, g.In)
	}
	ho, wo := g.OutputSize(h, w)
	if ho < 1 || wo < 1 {
		return nil, fmt.Errorf("%s: input %dx%d is smaller than the dilated kernel", c.name(), h, w)
	}
	c.n, c.h, c.w, c.ho, c.wo, c.have, c.relu = n, h, w, ho, wo, true, relu
	y := reuse(&c.out, c.n, g.Out, ho, wo)
	c.prepare(c.n, c.h, c.w, ho, wo)
	for _, src := range c.srcs {
		if src.up != nil {
			src.up.setShape(n, src.c, src.h, src.w)
			src.up.have = false // its Backward has no Forward to go back through
			for i := range c.workers {
				grow(&c.workers[i].rows, 2*w)
			}
		}
	}
	c.packForward()
	c.runPass(opPadInput)
	c.runPass(opForward)
	clear(c.srcArr[:]) // no reference to the inputs between passes
	c.srcs = nil
	return y, nil
}

// packForward packs the weights (and the bias as the last column) into
// 4-row panels: the weights change between steps, so once per pass, not per
// tile.
func (c *Conv2d) packForward() {
	g := c.Config
	ckk := g.In * g.Kernel * g.Kernel
	K := len(c.fwdOffs.offs)
	wt := Data(c.Weight.Value)
	var bias []float32
	if c.Bias != nil {
		bias = Data(c.Bias.Value)
	}
	for ob := 0; ob < g.Out; ob += tileRows {
		panel := c.wPack[ob*K : (ob+tileRows)*K]
		for i := 0; i < tileRows; i++ {
			o := ob + i
			if o >= g.Out {
				for l := 0; l < K; l++ {
					panel[l*tileRows+i] = 0
				}
				continue
			}
			for l, v := range wt[o*ckk : (o+1)*ckk] {
				panel[l*tileRows+i] = v
			}
			if bias != nil {
				panel[ckk*tileRows+i] = bias[o]
			}
		}
	}
}

// padInput copies channels [lo, hi) (image-major) of the input parts into
// their phase planes (worker w's scratch interpolates resized parts); the
// padding was zeroed when the buffer was made and is never written.
func (c *Conv2d) padInput(w, lo, hi int) {
	g, geo := c.Config, &c.geo
	s, A := g.Stride, geo.a
	hw := c.h * c.w
	for u := lo; u < hi; u++ {
		n, ch := u/g.In, u%g.In
		src, lc := &c.srcs[0], ch
		for i := 0; lc >= src.c; i++ {
			lc -= src.c
			src = &c.srcs[i+1]
		}
		if src.up != nil { // stride 1: one phase plane per channel
			lhw := src.h * src.w
			low := src.x[(n*src.c+lc)*lhw : (n*src.c+lc+1)*lhw]
			src.up.plane(low, c.xp[n*geo.imgX+ch*geo.planeX+A*geo.pitch+A:], geo.pitch, c.workers[w].rows)
			continue
		}
		img := src.x[(n*src.c+lc)*hw : (n*src.c+lc+1)*hw]
		if s == 2 {
			// Both column phases of a row in one pass over it.
			for rh := 0; rh < 2; rh++ {
				p0 := c.xp[n*geo.imgX+(ch*4+rh*2)*geo.planeX:]
				p1 := c.xp[n*geo.imgX+(ch*4+rh*2+1)*geo.planeX:]
				w0, w1 := phaseSize(c.w, 0, 2), phaseSize(c.w, 1, 2)
				for i := 0; i < phaseSize(c.h, rh, 2); i++ {
					row := img[(2*i+rh)*c.w : (2*i+rh+1)*c.w]
					o := (i+A)*geo.pitch + A
					deinterleave2(p0[o:o+w0], p1[o:o+w1], row, c.portable)
				}
			}
			continue
		}
		for rh := 0; rh < s; rh++ {
			for rw := 0; rw < s; rw++ {
				plane := c.xp[n*geo.imgX+(ch*s*s+rh*s+rw)*geo.planeX:]
				wph := phaseSize(c.w, rw, s)
				for i := 0; i < phaseSize(c.h, rh, s); i++ {
					row := img[(s*i+rh)*c.w : (s*i+rh+1)*c.w]
					dst := plane[(i+A)*geo.pitch+A : (i+A)*geo.pitch+A+wph]
					if s == 1 {
						copy(dst, row)
						continue
					}
					for j := range dst {
						dst[j] = row[s*j+rw]
					}
				}
			}
		}
	}
}

// forwardTiles computes output-position tiles [lo, hi) (image-major) into the
// worker's tile buffer and copies the valid columns out, adding the bias.
func (c *Conv2d) forwardTiles(w, lo, hi int) {
	g, geo := c.Config, &c.geo
	K := len(c.fwdOffs.offs)
	ys := Data(c.out)
	ct := c.workers[w].cTile
	for u := lo; u < hi; u++ {
		n, t := u/geo.tilesOut, u%geo.tilesOut
		q0 := t * convTile
		q1 := min(q0+convTile, geo.qOut)
		xn := c.xp[n*geo.imgX+q0:]
		for jr, np := 0, roundUp(q1-q0, tileCols); jr < np; {
			if jr+2*tileCols <= np { // two panels per call where AVX-512 registers allow
				for ib := 0; ib < g.Out; ib += tileRows {
					tile2(c.portable, K, c.wPack[ib*K:], xn[jr:], &c.fwdOffs, ct[ib*convTile+jr:], convTile, false)
				}
				jr += 2 * tileCols
				continue
			}
			for ib := 0; ib < g.Out; ib += tileRows {
				tile(c.portable, K, c.wPack[ib*K:], xn[jr:], &c.fwdOffs, ct[ib*convTile+jr:], convTile, false)
			}
			jr += tileCols
		}
		c.copyOut(ct, g.Out, q0, q1, ys[n*g.Out*c.ho*c.wo:], c.ho, c.wo, 1, 0, 0, c.ho, c.wo, c.relu)
	}
}

// copyOut writes the tile positions [q0, q1) (pitch layout, rows channels)
// whose row i < lh and column j < lw to dst (rows × dh × dw) at row
// s·i + rh, column s·j + rw; with relu, max(v, 0) (ReLU.Forward's
// expression) instead of v.
func (c *Conv2d) copyOut(ct []float32, rows, q0, q1 int, dst []float32, dh, dw, s, rh, rw, lh, lw int, relu bool) {
	pitch := c.geo.pitch
	for q := q0; q < q1; {
		i, j := q/pitch, q%pitch
		end := min(q1, (i+1)*pitch)
		if j < lw && i < lh {
			seg := min(end, i*pitch+lw) - q
			for r := 0; r < rows; r++ {
				src := ct[r*convTile+q-q0 : r*convTile+q-q0+seg]
				base := (r*dh+s*i+rh)*dw + s*j + rw
				if s > 1 {
					for t, v := range src {
						dst[base+s*t] = v
					}
					continue
				}
				if relu {
					reluCopy(c.portable, dst[base:base+seg], src)
					continue
				}
				copy(dst[base:base+seg], src)
			}
		}
		q = end
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
	g, geo := c.Config, &c.geo
	c.dy = gs
	defer func() { c.dy = nil }() // do not keep the caller's gradient alive
	if len(c.dyp) != geo.dypLen {
		c.dyp = make([]float32, geo.dypLen)
		c.biasSums = make([]float32, c.n*g.Out)
	}
	k := g.Kernel
	wt := Data(c.Weight.Value)
	for pi, ph := range geo.phases {
		// 4-row panels over the input channels, columns (o, tap).
		K := g.Out * len(ph.taps)
		pw := c.phaseW[pi]
		for cb := 0; cb < g.In; cb += tileRows {
			panel := pw[cb*K : (cb+tileRows)*K]
			for o := 0; o < g.Out; o++ {
				for ti, t := range ph.taps {
					l := o*len(ph.taps) + ti
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
	}
	dx := reuse(&c.dx, c.n, g.In, c.h, c.w)
	if !geo.allTaps {
		clear32(Data(dx))
	}
	c.runPass(opPadGrad)
	c.runPass(opWeightGrad)
	c.runPass(opInputGrad)
	if c.Bias != nil {
		bg := Data(c.Bias.Grad)
		for i, v := range c.biasSums {
			bg[i%g.Out] += v
		}
	}
	return dx, nil
}

// padGrad copies output-gradient planes [lo, hi) (image-major) into the
// padded buffer and sums each plane for the bias gradient, row by row as it
// copies (one read of dY from memory).
func (c *Conv2d) padGrad(lo, hi int) {
	geo := &c.geo
	g := c.Config
	P := c.ho * c.wo
	dst := func(u int) []float32 {
		n, o := u/g.Out, u%g.Out
		return c.dyp[n*geo.imgY+o*geo.planeY+geo.b*geo.pitch+geo.b:]
	}
	// Each plane's sum is one chain of adds in element order; four planes at
	// a time keep four chains in flight (the same sums, four times faster
	// than one chain's add latency allows).
	u := lo
	for ; u+4 <= hi; u += 4 {
		d0, d1, d2, d3 := dst(u), dst(u+1), dst(u+2), dst(u+3)
		var s0, s1, s2, s3 float32
		for oh := 0; oh < c.ho; oh++ {
			r := oh * c.wo
			p0, p1, p2, p3 := c.dy[u*P+r:u*P+r+c.wo], c.dy[(u+1)*P+r:(u+1)*P+r+c.wo], c.dy[(u+2)*P+r:(u+2)*P+r+c.wo], c.dy[(u+3)*P+r:(u+3)*P+r+c.wo]
			for t, v := range p0 {
				s0 += v
				s1 += p1[t]
				s2 += p2[t]
				s3 += p3[t]
			}
			q := oh * geo.pitch
			copy(d0[q:q+c.wo], p0)
			copy(d1[q:q+c.wo], p1)
			copy(d2[q:q+c.wo], p2)
			copy(d3[q:q+c.wo], p3)
		}
		c.biasSums[u], c.biasSums[u+1], c.biasSums[u+2], c.biasSums[u+3] = s0, s1, s2, s3
	}
	for ; u < hi; u++ {
		d := dst(u)
		var sum float32
		for oh := 0; oh < c.ho; oh++ {
			row := c.dy[u*P+oh*c.wo : u*P+(oh+1)*c.wo]
			for _, v := range row {
				sum += v
			}
			copy(d[oh*geo.pitch:oh*geo.pitch+c.wo], row)
		}
		c.biasSums[u] = sum
	}
}

// weightGrad accumulates dW[:, r] for the patch rows r in blocks [lo, hi) of
// 3: per image, per run of convQBlock positions, per block of 4 output
// channels, the dot kernel on the padded output gradient and the windows of
// the input phase planes. Each patch row has one worker, so the sums do not
// depend on the number of workers.
func (c *Conv2d) weightGrad(w, lo, hi int) {
	g, geo := c.Config, &c.geo
	ckk := g.In * g.Kernel * g.Kernel
	wg := Data(c.Weight.Grad)
	offs := c.fwdOffs.offs
	base := geo.b*geo.pitch + geo.b
	wk := &c.workers[w]
	var a [dotRows][]float32
	var b [dotCols][]float32
	var b6 [2 * dotCols][]float32
	// With AVX-512VL, pairs of blocks go to kernelDot6Runs over the whole
	// image: it adds each run's sums to the gathered dW values itself, so
	// every element of dW sees the same additions in the same order as
	// below, without a kernel call and a scatter per run.
	single := lo
	if haveWide && !c.portable {
		single = lo + (hi-lo)/2*2
	}
	for n := 0; n < c.n; n++ {
		dyn := c.dyp[n*geo.imgY+base:]
		xn := c.xp[n*geo.imgX:]
		for ob := 0; ob < g.Out && lo < single; ob += dotRows {
			for i := range a {
				// Rows past Out read the zero planes of the padded buffer.
				a[i] = dyn[(ob+i)*geo.planeY : (ob+i)*geo.planeY+geo.dotLen]
			}
			for rb := lo; rb < single; rb += 2 {
				r0 := rb * dotCols
				for j := range b6 {
					r := min(r0+j, ckk-1) // past the last row: repeat it, drop the sums
					b6[j] = xn[offs[r] : offs[r]+geo.dotLen]
				}
				// sums6: the first block's 4x3 values, then the second's.
				for i := 0; i < dotRows; i++ {
					for j := 0; j < 2*dotCols; j++ {
						v := float32(0)
						if ob+i < g.Out && r0+j < ckk {
							v = wg[(ob+i)*ckk+r0+j]
						}
						wk.sums6[(j/dotCols)*dotRows*dotCols+i*dotCols+j%dotCols] = v
					}
				}
				dot6Runs(geo.dotLen/dotStep, convQBlock/dotStep, &a, &b6, &wk.sums6)
				for i := 0; i < dotRows && ob+i < g.Out; i++ {
					row := wg[(ob+i)*ckk:]
					for j := 0; j < 2*dotCols && r0+j < ckk; j++ {
						row[r0+j] = wk.sums6[(j/dotCols)*dotRows*dotCols+i*dotCols+j%dotCols]
					}
				}
			}
		}
		if single == hi {
			continue
		}
		for q0 := 0; q0 < geo.dotLen; q0 += convQBlock {
			q1 := min(q0+convQBlock, geo.dotLen)
			for ob := 0; ob < g.Out; ob += dotRows {
				for i := range a {
					a[i] = dyn[(ob+i)*geo.planeY+q0 : (ob+i)*geo.planeY+q1]
				}
				for rb := single; rb < hi; rb++ {
					r0 := rb * dotCols
					for j := range b {
						r := min(r0+j, ckk-1)
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

// inputGrad computes input-gradient units [lo, hi): per image, per phase, per
// tile of that phase's positions, the tile kernel on the padded output
// gradient with the phase's taps, scattered into dx.
func (c *Conv2d) inputGrad(w, lo, hi int) {
	g, geo := c.Config, &c.geo
	dxs := Data(c.dx)
	ct := c.workers[w].cTile
	for u := lo; u < hi; u++ {
		n, t := u/geo.inUnits, u%geo.inUnits
		pi := 0
		for t >= geo.phases[pi].tiles {
			t -= geo.phases[pi].tiles
			pi++
		}
		ph := &geo.phases[pi]
		K := g.Out * len(ph.taps)
		q0 := t * convTile
		q1 := min(q0+convTile, ph.hph*geo.pitch)
		dyn := c.dyp[n*geo.imgY+q0:]
		for jr, np := 0, roundUp(q1-q0, tileCols); jr < np; {
			if jr+2*tileCols <= np {
				for cb := 0; cb < g.In; cb += tileRows {
					tile2(c.portable, K, c.phaseW[pi][cb*K:], dyn[jr:], &c.phaseOffs[pi], ct[cb*convTile+jr:], convTile, false)
				}
				jr += 2 * tileCols
				continue
			}
			for cb := 0; cb < g.In; cb += tileRows {
				tile(c.portable, K, c.phaseW[pi][cb*K:], dyn[jr:], &c.phaseOffs[pi], ct[cb*convTile+jr:], convTile, false)
			}
			jr += tileCols
		}
		c.copyOut(ct, g.In, q0, q1, dxs[n*g.In*c.h*c.w:], c.h, c.w, g.Stride, ph.rh, ph.rw, ph.hph, ph.wph, false)
	}
}

// Params returns the weight and, when configured, the bias.
func (c *Conv2d) Params() []*Param {
	if c.Bias != nil {
		return []*Param{c.Weight, c.Bias}
	}
	return []*Param{c.Weight}
}
