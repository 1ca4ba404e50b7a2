package nn

import "gorgonia.org/tensor"

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
