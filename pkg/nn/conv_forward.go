package nn

import (
	"fmt"

	"gorgonia.org/tensor"
)

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
