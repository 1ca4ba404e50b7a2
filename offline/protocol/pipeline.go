package protocol

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset/corrupt"
)

// The evaluation is a pipeline: one goroutine prepares the frames (corrupts
// them, runs the main model and the gradient score) into a ring of
// frameSlots, and one goroutine per seed runs its methods on every frame in
// turn, finalizing each condition as soon as it has seen its last frame. A
// slot goes back to the preparer once every seed has read it. There is no
// barrier between frames or conditions, so a core never waits for the
// slowest seed of a frame, the serial parts of the preparation run beside
// the seeds' work, and the seeds' condition ends (sorts of the pools) overlap
// each other and the next condition's frames. Each seed still handles its
// frames in the same order with the same buffers, and the table is filled
// in the order of the sequential loop (condition, then seed), so the results
// are bit-identical to evaluating frame by frame.

// evalSlots is the number of prepared frames in flight: the seeds may drift
// apart by that many frames. A slot holds about 3 MB at 640x192.
const evalSlots = 6

// seedConvWorkers is the number of goroutines each network's convolutions
// use while the seeds train their AuxUEs or evaluate concurrently: 1 when
// the seeds' goroutines alone are at least as many as the cores (they keep
// every core busy, and a convolution split across a pool would only add
// hand-offs and a barrier per pass: on the 2-core machine with 3 seeds the
// probe evaluation took 106 s and 179 CPU-seconds with pools of 2, 93 s and
// 166 CPU-seconds without), else GOMAXPROCS.
func seedConvWorkers(seeds int) int {
	if seeds >= runtime.GOMAXPROCS(0) {
		return 1
	}
	return 0
}

// evalCond is one evaluation condition (clean is severity 0).
type evalCond struct {
	corr string
	sev  int
}

// frameSlot is one prepared frame of the ring.
type frameSlot struct {
	in   frameInputs
	rgb  []uint8      // the corrupted frame
	left atomic.Int32 // seeds that have not finished with it
}

// tableCell is one value a seed's finalize writes; the cells are copied into
// the table after the run in the sequential loop's order, which fixes the
// table's row order.
type tableCell struct {
	key rowKey
	v   float64
}

// evaluation is what the pipeline's goroutines share.
type evaluation struct {
	plan     *evalPlan
	workers  []*seedWorker
	main     *depthModel
	test     []frame
	indoor   []frame
	conds    []evalCond
	nMethods int
	w, h     int
	decLen   int
	log      *slog.Logger
}

// indoorCond is the condition index of the indoor frames (it seeds their
// dropout masks; the indoor frames are read with the clean condition).
const indoorCond = 1 << 10

// run evaluates every condition and writes the figures into tab.
func (e *evaluation) run(ctx context.Context, tab *table) error {
	start := time.Now()
	nSeeds := len(e.workers)
	hw := e.w * e.h
	free := make(chan *frameSlot, evalSlots)
	for range evalSlots {
		s := &frameSlot{in: frameInputs{depth: make([]float32, hw), img: make([]float32, 3*hw), grad: make([]float32, hw),
			gtMask: make([]bool, hw), skyMask: make([]bool, hw)}, rgb: make([]uint8, 3*hw)}
		if e.decLen > 0 {
			s.in.dec = make([]float32, e.decLen)
		}
		free <- s
	}
	feeds := make([]chan *frameSlot, nSeeds)
	for si := range feeds {
		feeds[si] = make(chan *frameSlot, evalSlots) // never full: there are evalSlots slots
	}
	cells := make([][][]tableCell, nSeeds) // per seed and condition
	condsDone := make([]atomic.Int32, len(e.conds))
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return e.prepareAll(ctx, free, feeds) })
	for si := range nSeeds {
		cells[si] = make([][]tableCell, len(e.conds))
		g.Go(func() error {
			w := e.workers[si]
			var uce metrics.UCE
			next := func() (*frameSlot, error) {
				select {
				case s := <-feeds[si]:
					return s, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			release := func(s *frameSlot) {
				if s.left.Add(-1) == 0 {
					free <- s // never blocks: at most evalSlots slots exist
				}
			}
			for ci, cd := range e.conds {
				w.resetAccs(e.nMethods)
				for range e.test {
					s, err := next()
					if err != nil {
						return err
					}
					ensOut, err := w.produce(e.plan, &s.in)
					if err == nil {
						err = w.accumulate(e.plan, &s.in, ensOut)
					}
					release(s)
					if err != nil {
						return err
					}
				}
				if ci == 0 {
					// Dataset change: indoor GT pixels are the positives.
					for range e.indoor {
						s, err := next()
						if err != nil {
							return err
						}
						_, err = w.produce(e.plan, &s.in)
						if err == nil {
							err = w.addIndoor(e.plan, &s.in)
						}
						release(s)
						if err != nil {
							return err
						}
					}
				}
				if err := w.finalize(e.plan, &cells[si][ci], cd.corr, cd.sev, ci == 0, &uce); err != nil {
					return err
				}
				if condsDone[ci].Add(1) == int32(nSeeds) {
					e.log.Info("eval: condition done", "corruption", cd.corr, "severity", cd.sev, "done", ci+1, "of", len(e.conds),
						"elapsed", time.Since(start).Round(time.Second))
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for ci := range e.conds {
		for si := range nSeeds {
			for _, c := range cells[si][ci] {
				tab.set(c.key, si, c.v)
			}
		}
	}
	return nil
}

// prepareAll fills a free slot with each frame of the sequence the seed
// workers read (every condition's test frames, after the clean ones the
// indoor frames) and hands it to every seed.
func (e *evaluation) prepareAll(ctx context.Context, free chan *frameSlot, feeds []chan *frameSlot) error {
	corr := corrupt.NewCorruptor()
	gradient := e.plan.c.Baselines.Gradient
	put := func(fr *frame, cd evalCond, cond, index int) error {
		var s *frameSlot
		select {
		case s = <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
		in := &s.in
		pixels := fr.rgb
		if cd.sev > 0 {
			if err := corr.Apply(s.rgb, fr.rgb, e.w, e.h, cd.corr, cd.sev, uint64(1000*index+cd.sev)); err != nil {
				return fmt.Errorf("corrupt frame %d: %w", index, err)
			}
			pixels = s.rgb
		}
		// What every seed reads of the frame: the main model's depth and
		// features and the gradient score.
		main := e.main
		if gradient {
			main.setImage(pixels, false)
			if err := main.gradientScore(pixels, in.grad); err != nil {
				return err
			}
		}
		main.setImage(pixels, false)
		if err := main.predictFeatures(in.depth, in.dec); err != nil {
			return err
		}
		copy(in.img, main.image())
		in.fr, in.pixels, in.cond, in.index = fr, pixels, cond, index
		for i := range in.gtMask {
			in.gtMask[i] = fr.sparse[i] > 0
			in.skyMask[i] = fr.sem[i] == metrics.SkyClass
		}
		s.left.Store(int32(len(feeds)))
		for _, f := range feeds {
			f <- s
		}
		return nil
	}
	for ci, cd := range e.conds {
		for fi := range e.test {
			if err := put(&e.test[fi], cd, ci, fi); err != nil {
				return err
			}
		}
		if ci == 0 {
			for fi := range e.indoor {
				if err := put(&e.indoor[fi], evalCond{CorrClean, 0}, indoorCond, fi); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
