package nn

import (
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Portable path: gonum's Sgemm spawns one goroutine per 64x64 block of C once
// C spans at least four such blocks. gemm tiles C so that every call stays
// below that threshold and runs serially, with no allocation; the layers
// parallelize one level up, across images or columns, with a fixed number of
// workers.
const (
	gemmTileRows = 64
	gemmTileCols = 192
)

// gemmScratch holds the packing buffers of one goroutine's GEMM calls, so
// that steady-state calls allocate nothing. The zero value is ready to use.
type gemmScratch struct {
	packA, packB []float32
	edge         [kernelRows * kernelCols]float32
	// portable forces gonum's kernel even where the AVX2 kernel runs (tests).
	portable bool
}

// Blocking of the packed GEMM: a kc×(n rounded up to 16) B block stays in L2
// and a 6×kc A panel in L1 while the micro-kernel streams.
const (
	kernelRows = 6
	kernelCols = 16
	blockK     = 512
	blockM     = 72
	blockN     = 3072
)

// gemm computes C = op(A) op(B) (+ C when accumulate) for row-major matrices,
// where op(A) is m x k and op(B) is k x n. It runs on the calling goroutine:
// with the AVX2+FMA micro-kernel where the CPU has it, else with gonum's.
func gemm(s *gemmScratch, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	if m == 0 || n == 0 {
		return
	}
	if haveKernel && !s.portable && k > 0 {
		gemmPacked(s, transA, transB, m, n, k, a, lda, b, ldb, c, ldc, accumulate)
		return
	}
	if k == 0 {
		if !accumulate {
			for i := 0; i < m; i++ {
				clear32(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	_ = s
	var impl gonum.Implementation
	ta, tb := blas.NoTrans, blas.NoTrans
	if transA {
		ta = blas.Trans
	}
	if transB {
		tb = blas.Trans
	}
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	for i0 := 0; i0 < m; i0 += gemmTileRows {
		mi := min(gemmTileRows, m-i0)
		// Row i0 of op(A): element (i0, 0).
		var aSub []float32
		if transA {
			aSub = a[i0:]
		} else {
			aSub = a[i0*lda:]
		}
		for j0 := 0; j0 < n; j0 += gemmTileCols {
			nj := min(gemmTileCols, n-j0)
			var bSub []float32
			if transB {
				bSub = b[j0*ldb:]
			} else {
				bSub = b[j0:]
			}
			impl.Sgemm(ta, tb, mi, nj, k, 1, aSub, lda, bSub, ldb, beta, c[i0*ldc+j0:], ldc)
		}
	}
}

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

// gemmPacked is a BLIS-style GEMM: blocks of op(B) and op(A) are packed into
// panels of 16 columns and 6 rows (zero-padded at the edges) and multiplied by
// kernel6x16; edge tiles go through a small buffer.
func gemmPacked(s *gemmScratch, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accumulate bool) {
	if !accumulate {
		for i := 0; i < m; i++ {
			clear32(c[i*ldc : i*ldc+n])
		}
	}
	for jc := 0; jc < n; jc += blockN {
		nc := min(blockN, n-jc)
		ncPad := (nc + kernelCols - 1) / kernelCols * kernelCols
		for pc := 0; pc < k; pc += blockK {
			kc := min(blockK, k-pc)
			pb := grow(&s.packB, kc*ncPad)
			packB(pb, transB, b, ldb, pc, kc, jc, nc)
			for ic := 0; ic < m; ic += blockM {
				mc := min(blockM, m-ic)
				mcPad := (mc + kernelRows - 1) / kernelRows * kernelRows
				pa := grow(&s.packA, kc*mcPad)
				packA(pa, transA, a, lda, ic, mc, pc, kc)
				for jr := 0; jr < nc; jr += kernelCols {
					bp := pb[jr*kc:]
					nr := min(kernelCols, nc-jr)
					for ir := 0; ir < mc; ir += kernelRows {
						ap := pa[ir*kc:]
						mr := min(kernelRows, mc-ir)
						ci := (ic+ir)*ldc + jc + jr
						if mr == kernelRows && nr == kernelCols {
							_ = c[ci+(kernelRows-1)*ldc+kernelCols-1] // the kernel writes 6 rows of 16
							kernel6x16(kc, &ap[0], &bp[0], &c[ci], ldc)
							continue
						}
						e := s.edge[:]
						clear32(e)
						kernel6x16(kc, &ap[0], &bp[0], &e[0], kernelCols)
						for r := 0; r < mr; r++ {
							row := c[ci+r*ldc : ci+r*ldc+nr]
							for j := range row {
								row[j] += e[r*kernelCols+j]
							}
						}
					}
				}
			}
		}
	}
}

// packA writes rows [i0, i0+mc) × columns [p0, p0+kc) of op(A) as panels of
// 6 rows: panel q holds, for each l, the values of rows 6q..6q+5 (0 past mc).
func packA(dst []float32, trans bool, a []float32, lda, i0, mc, p0, kc int) {
	for q := 0; q*kernelRows < mc; q++ {
		panel := dst[q*kernelRows*kc : (q+1)*kernelRows*kc]
		rows := min(kernelRows, mc-q*kernelRows)
		for r := 0; r < kernelRows; r++ {
			if r >= rows {
				for l := 0; l < kc; l++ {
					panel[l*kernelRows+r] = 0
				}
				continue
			}
			i := i0 + q*kernelRows + r
			if trans { // op(A)(i, l) = a[l*lda + i]
				for l := 0; l < kc; l++ {
					panel[l*kernelRows+r] = a[(p0+l)*lda+i]
				}
			} else {
				src := a[i*lda+p0 : i*lda+p0+kc]
				for l, v := range src {
					panel[l*kernelRows+r] = v
				}
			}
		}
	}
}

// packB writes rows [p0, p0+kc) × columns [j0, j0+nc) of op(B) as panels of
// 16 columns: panel q holds, for each l, columns 16q..16q+15 (0 past nc).
func packB(dst []float32, trans bool, b []float32, ldb, p0, kc, j0, nc int) {
	for q := 0; q*kernelCols < nc; q++ {
		panel := dst[q*kernelCols*kc : (q+1)*kernelCols*kc]
		cols := min(kernelCols, nc-q*kernelCols)
		jq := j0 + q*kernelCols
		if !trans {
			for l := 0; l < kc; l++ {
				out := panel[l*kernelCols : (l+1)*kernelCols]
				src := b[(p0+l)*ldb+jq:]
				copy(out[:cols], src[:cols])
				clear32(out[cols:])
			}
			continue
		}
		// op(B)(l, j) = b[j*ldb + l]
		for j := 0; j < kernelCols; j++ {
			if j >= cols {
				for l := 0; l < kc; l++ {
					panel[l*kernelCols+j] = 0
				}
				continue
			}
			src := b[(jq+j)*ldb+p0 : (jq+j)*ldb+p0+kc]
			for l, v := range src {
				panel[l*kernelCols+j] = v
			}
		}
	}
}
