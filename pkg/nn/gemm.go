package nn

import (
	"runtime"
	"sync/atomic"
	"time"
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

// workerPool keeps size-1 goroutines waiting for passes so that a parallel
// pass costs no allocation (spawning goroutines allocates their closures).
//
// A pass hands out its units in chunks from a shared counter (guided
// scheduling: each chunk is a share of what is left, never below the pass's
// grain), so a worker whose core is slower, or busy with another process,
// takes fewer chunks instead of holding up the barrier at the end of the
// pass. A chunk runs whole on one worker, and every pass computes each
// unit's results the same way whoever runs it, so the results do not depend
// on the schedule.
//
// Between passes a worker, and the caller at the end of a pass, poll for up
// to poolSpin (yielding the processor to other goroutines meanwhile) before
// they block: a layer's passes follow each other within microseconds, and
// waking a blocked thread took about 100 µs per pass on the 2-vCPU VM (the
// idle vCPU halts), 5 % of a 32-channel step at 2 threads. Blocking uses a
// flag checked on both sides after the other side's counter, so no wake-up
// is lost. The workers hold no reference to the layer between passes, so the
// layer can be collected; a cleanup registered by the owner then closes the
// pool.
type workerPool struct {
	size int // workers including the calling goroutine
	ws   []poolWorker

	gen    atomic.Uint64 // pass number; a change starts a pass (or closes the pool)
	closed atomic.Bool

	// The current pass, set before gen changes.
	r     tileRunner
	op    int
	next  atomic.Int64 // first unit not yet handed out
	n     int          // units
	grain int          // smallest chunk; chunks start at multiples of it
	nw    int          // workers taking part

	left       atomic.Int32  // workers (not the caller) still in the pass
	callerWait atomic.Bool   // the caller blocks on done
	done       chan struct{} // buffered 1
}

// poolWorker is one worker goroutine's wake-up state.
type poolWorker struct {
	asleep atomic.Bool   // blocked on wake
	wake   chan struct{} // buffered 1
}

// poolSpin is how long a waiting side polls before it blocks.
const poolSpin = 200 * time.Microsecond

func newWorkerPool(size int) *workerPool {
	p := &workerPool{size: max(size, 1), done: make(chan struct{}, 1)}
	p.ws = make([]poolWorker, p.size)
	for w := 1; w < p.size; w++ {
		p.ws[w].wake = make(chan struct{}, 1)
		go p.work(w)
	}
	return p
}

func (p *workerPool) work(w int) {
	me := &p.ws[w]
	var seen uint64
	for {
		seen = p.await(me, seen)
		if p.closed.Load() {
			return
		}
		if w < p.nw {
			p.drain(p.r, p.op, w)
		}
		if p.left.Add(-1) == 0 && p.callerWait.CompareAndSwap(true, false) {
			p.done <- struct{}{}
		}
	}
}

// await returns the pass number once it differs from seen: polling first,
// then blocked on the worker's wake channel.
//
// A wake-up is only a hint: a worker woken while the pass number is still
// seen goes back to sleep. With sequentially consistent atomics a token
// is never left over, but under qemu-aarch64 (CI's arm64 tests) one was: a
// worker woken with the pass number unchanged ran its last pass again,
// checked in twice, and the caller waited for ever (left below zero). The
// check after the wake-up makes such a token harmless.
func (p *workerPool) await(me *poolWorker, seen uint64) uint64 {
	for t0 := time.Now(); time.Since(t0) < poolSpin; runtime.Gosched() {
		if g := p.gen.Load(); g != seen {
			return g
		}
	}
	for {
		me.asleep.Store(true)
		if g := p.gen.Load(); g != seen {
			if !me.asleep.CompareAndSwap(true, false) {
				<-me.wake // the caller saw us asleep and sent a token: take it
			}
			return g
		}
		<-me.wake
		if g := p.gen.Load(); g != seen {
			return g
		}
	}
}

// start bumps the pass number and wakes the workers that sleep.
func (p *workerPool) start() {
	p.gen.Add(1)
	for w := 1; w < p.size; w++ {
		if ws := &p.ws[w]; ws.asleep.CompareAndSwap(true, false) {
			ws.wake <- struct{}{}
		}
	}
}

func (p *workerPool) close() {
	p.closed.Store(true)
	p.start()
}

// run runs units [0, n) of pass op on the pool's workers, the calling
// goroutine included, in chunks of at least grain units, and waits.
func (p *workerPool) run(r tileRunner, op, n, grain int) {
	nw := min(p.size, n)
	if nw <= 1 {
		if n > 0 {
			r.runTiles(op, 0, 0, n)
		}
		return
	}
	p.r, p.op, p.n, p.grain, p.nw = r, op, n, max(grain, 1), nw
	p.next.Store(0)
	p.left.Store(int32(p.size - 1)) // every worker checks in, taking part or not
	p.start()
	p.drain(r, op, 0)
	p.wait()
	p.r = nil // no reference to the layer between passes
}

// wait returns once every worker has finished the pass.
func (p *workerPool) wait() {
	for t0 := time.Now(); time.Since(t0) < poolSpin; runtime.Gosched() {
		if p.left.Load() == 0 {
			return
		}
	}
	// As in await, a token is a hint: the pass is over when left is 0.
	for {
		p.callerWait.Store(true)
		if p.left.Load() == 0 {
			if !p.callerWait.CompareAndSwap(true, false) {
				<-p.done
			}
			return
		}
		<-p.done
		if p.left.Load() == 0 {
			return
		}
	}
}

// drain runs chunks of the current pass as worker w until none is left.
// A chunk is (what is left)/(2·workers) units rounded up to the grain: large
// chunks first (locality), small ones at the end (balance).
func (p *workerPool) drain(r tileRunner, op, w int) {
	for {
		lo := int(p.next.Load())
		if lo >= p.n {
			return
		}
		size := roundUp(max((p.n-lo)/(2*p.nw), 1), p.grain)
		hi := min(lo+size, p.n)
		if !p.next.CompareAndSwap(int64(lo), int64(hi)) {
			continue
		}
		r.runTiles(op, w, lo, hi)
	}
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
