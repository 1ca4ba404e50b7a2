package nn

import (
	"runtime"
	"sync"
)

// gemmScratch holds the packing buffers of one goroutine's GEMM calls, so
// that steady-state calls allocate nothing. The zero value is ready to use.
type gemmScratch struct {
	packA, packB []float32
	rows, panel  rowOffsets // B rows l·ldb (read in place) and l·24 (packed)
	edge         [tileRows * tileCols]float32
	// portable forces the Go kernels even where the assembly ones run (tests).
	portable bool
}

// Blocking of the packed GEMM: an mc×kc A block stays in L2, the A panel
// (4×kc) and the B rows a tile reads in L1/L2. blockK is also the summation
// structure: every element of C is C + Σ_{k in block} a·b, one FMA chain per
// block of 512 in increasing k, which is what the GEMM before the 4x24 kernel
// computed too (its results are reproduced bit for bit).
const (
	blockK = 512
	blockM = 128
	blockN = 24 * 100
)

// gemm computes C = op(A) op(B) (+ C when accumulate) for row-major matrices,
// where op(A) is m x k and op(B) is k x n, on the calling goroutine. op(A) is
// packed into panels of 4 rows; a non-transposed B is read in place (only a
// last panel narrower than 24 columns is copied), a transposed B is packed
// into panels of 24 columns; both go through the tile kernel.
func gemm(s *gemmScratch, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	if m == 0 || n == 0 {
		return
	}
	if !accumulate {
		// C = 0 + Σ, not Σ: the same value but for the sign of an exact zero,
		// as the earlier GEMM computed it.
		for i := 0; i < m; i++ {
			clear32(c[i*ldc : i*ldc+n])
		}
	}
	for pc := 0; pc < k; pc += blockK {
		kc := min(blockK, k-pc)
		const acc = true
		s.panel.strided(kc, tileCols)
		if !transB {
			s.rows.strided(kc, ldb)
		}
		for jc := 0; jc < n; jc += blockN {
			nc := min(blockN, n-jc)
			full := nc / tileCols * tileCols // columns in whole panels
			var pb []float32
			switch {
			case transB:
				pb = grow(&s.packB, kc*roundUp(nc, tileCols))
				packB(pb, true, b, ldb, pc, kc, jc, nc)
			case full < nc:
				pb = grow(&s.packB, kc*tileCols)
				packB(pb, false, b, ldb, pc, kc, jc+full, nc-full)
			}
			for ic := 0; ic < m; ic += blockM {
				mc := min(blockM, m-ic)
				pa := grow(&s.packA, kc*roundUp(mc, tileRows))
				packA(pa, transA, a, lda, ic, mc, pc, kc)
				for jr := 0; jr < nc; jr += tileCols {
					nr := min(tileCols, nc-jr)
					bp, offs := pb, &s.panel
					switch {
					case transB:
						bp = pb[jr*kc:]
					case nr == tileCols:
						bp, offs = b[pc*ldb+jc+jr:], &s.rows
					}
					for ir := 0; ir < mc; ir += tileRows {
						mr := min(tileRows, mc-ir)
						ap := pa[ir*kc:]
						ci := (ic+ir)*ldc + jc + jr
						if mr == tileRows && nr == tileCols {
							tile(s.portable, kc, ap, bp, offs, c[ci:], ldc, acc)
							continue
						}
						e := s.edge[:]
						tile(s.portable, kc, ap, bp, offs, e, tileCols, false)
						for r := 0; r < mr; r++ {
							row := c[ci+r*ldc : ci+r*ldc+nr]
							for j := range row {
								row[j] += e[r*tileCols+j]
							}
						}
					}
				}
			}
		}
	}
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// workers is the number of goroutines a layer splits its work across.
func workers() int { return max(1, runtime.GOMAXPROCS(0)) }

// tileRunner is a layer whose work splits into units [lo, hi) run by worker w;
// op selects which pass.
type tileRunner interface {
	runTiles(op, w, lo, hi int)
}

// workerPool keeps size-1 goroutines parked on a channel so that a parallel
// pass costs no allocation (spawning goroutines allocates their closures).
// The workers never reference the layer between jobs, so the layer can be
// collected; a cleanup registered by the owner then closes the pool.
type workerPool struct {
	jobs chan poolJob
	wg   sync.WaitGroup
	size int // workers including the calling goroutine
}

type poolJob struct {
	r             tileRunner
	op, w, lo, hi int
}

func newWorkerPool(size int) *workerPool {
	p := &workerPool{jobs: make(chan poolJob), size: max(size, 1)}
	for i := 1; i < p.size; i++ {
		go p.work()
	}
	return p
}

func (p *workerPool) work() {
	for job := range p.jobs {
		job.r.runTiles(job.op, job.w, job.lo, job.hi)
		job = poolJob{} // drop the layer reference while parked
		p.wg.Done()
	}
}

func (p *workerPool) close() { close(p.jobs) }

// run splits [0, n) into contiguous chunks, one per worker, runs them and
// waits; the calling goroutine takes the first chunk.
func (p *workerPool) run(r tileRunner, op, n int) {
	nw := min(p.size, n)
	if nw <= 1 {
		if n > 0 {
			r.runTiles(op, 0, 0, n)
		}
		return
	}
	p.wg.Add(nw - 1)
	for w := 1; w < nw; w++ {
		p.jobs <- poolJob{r: r, op: op, w: w, lo: w * n / nw, hi: (w + 1) * n / nw}
	}
	r.runTiles(op, 0, 0, n/nw)
	p.wg.Wait()
}

// packA writes rows [i0, i0+mc) × columns [p0, p0+kc) of op(A) as panels of
// 4 rows: panel q holds, for each l, the values of rows 4q..4q+3 (0 past mc).
func packA(dst []float32, trans bool, a []float32, lda, i0, mc, p0, kc int) {
	for q := 0; q*tileRows < mc; q++ {
		panel := dst[q*tileRows*kc : (q+1)*tileRows*kc]
		rows := min(tileRows, mc-q*tileRows)
		for r := 0; r < tileRows; r++ {
			if r >= rows {
				for l := 0; l < kc; l++ {
					panel[l*tileRows+r] = 0
				}
				continue
			}
			i := i0 + q*tileRows + r
			if trans { // op(A)(i, l) = a[l*lda + i]
				for l := 0; l < kc; l++ {
					panel[l*tileRows+r] = a[(p0+l)*lda+i]
				}
			} else {
				src := a[i*lda+p0 : i*lda+p0+kc]
				for l, v := range src {
					panel[l*tileRows+r] = v
				}
			}
		}
	}
}

// packB writes rows [p0, p0+kc) × columns [j0, j0+nc) of op(B) as panels of
// 24 columns: panel q holds, for each l, columns 24q..24q+23 (0 past nc).
func packB(dst []float32, trans bool, b []float32, ldb, p0, kc, j0, nc int) {
	for q := 0; q*tileCols < nc; q++ {
		panel := dst[q*tileCols*kc : (q+1)*tileCols*kc]
		cols := min(tileCols, nc-q*tileCols)
		jq := j0 + q*tileCols
		if !trans {
			for l := 0; l < kc; l++ {
				out := panel[l*tileCols : (l+1)*tileCols]
				src := b[(p0+l)*ldb+jq:]
				copy(out[:cols], src[:cols])
				clear32(out[cols:])
			}
			continue
		}
		// op(B)(l, j) = b[j*ldb + l]
		for j := 0; j < tileCols; j++ {
			if j >= cols {
				for l := 0; l < kc; l++ {
					panel[l*tileCols+j] = 0
				}
				continue
			}
			src := b[(jq+j)*ldb+p0 : (jq+j)*ldb+p0+kc]
			for l, v := range src {
				panel[l*tileCols+j] = v
			}
		}
	}
}
