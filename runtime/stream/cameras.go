package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// runState is what Run shares with the cameras' goroutines: their parent
// context, the channel of their frames and errors, the results of source
// restarts, and a wait group of every goroutine of every camera; and the
// scheduler's own state (its goroutine only): which cameras have a frame,
// and how many have a source that did not end.
type runState struct {
	camCtx    context.Context
	got       chan fetch
	restarted chan restartResult
	wg        sync.WaitGroup

	sched scheduler
	live  int
}

// fetch is one frame a camera's fetcher got, or its source's error; gen is
// the fetcher's generation (a restart starts a new one). The camera is a
// pointer, not an index: cameras added or removed at run time move the
// others' indexes while their notifications wait in the channel.
type fetch struct {
	cam   *cameraPipe
	gen   uint64
	frame *camera.Frame
	err   error
}

// restartResult is a camera's new source after an in-process restart
// (src nil: the same source again), or why none could be opened.
type restartResult struct {
	cam  *cameraPipe
	src  camera.Source
	rtsp *camera.RTSPSource
	err  error
}

// restartAfter is pipeline.camera_restart: how long a camera may go
// without a processed frame before its source is restarted.
func (p *Pipeline) restartAfter() time.Duration { return p.cfg.Pipeline.CameraRestart }

// startCamera starts the camera's source goroutine (an RTSP client the
// pipeline opened) and its fetcher under a context of their own, so that
// a restart stops this camera only. Scheduler goroutine only.
func (p *Pipeline) startCamera(rs *runState, c *cameraPipe) {
	ctx, cancel := context.WithCancel(rs.camCtx)
	done := make(chan struct{})
	c.stop, c.stopped = cancel, done
	gen := c.gen.Load()
	c.srcMu.Lock()
	src, rtsp := c.src, c.rtsp
	c.srcMu.Unlock()
	cp, ok := src.(camera.ConsumerPaced)
	c.paced = ok && cp.ConsumerPaced()
	var wg sync.WaitGroup
	if rtsp != nil {
		wg.Go(func() { rtsp.Run(ctx) })
	}
	wg.Go(func() { c.fetchLoop(ctx, src, gen, rs.got) })
	rs.wg.Go(func() { wg.Wait(); close(done) })
}

// fetchLoop is the camera's fetcher: it takes the newest frame of src and
// stages it into a free slot until ctx ends or src fails.
func (c *cameraPipe) fetchLoop(ctx context.Context, src camera.Source, gen uint64, got chan<- fetch) {
	for {
		var s *frameSlot
		select {
		case s = <-c.free:
		case <-ctx.Done():
			return
		}
		if !c.waitTaken(ctx) {
			c.free <- s
			return
		}
		if err := src.Next(ctx, &s.frame); err != nil {
			c.free <- s
			select {
			case got <- fetch{cam: c, gen: gen, err: err}:
			case <-ctx.Done():
			}
			return
		}
		c.stage(s)
		select {
		case got <- fetch{cam: c, gen: gen}:
		case <-ctx.Done():
			return
		}
	}
}

// superviseCameras restarts, inside the process, the source of every
// camera that processed no frame for pipeline.camera_restart (counted
// from the start of Run, or from its last restart): the camera's source
// goroutine and fetcher are stopped, its source reopened (the one the
// config describes; Options.OpenSource for sources given by the caller,
// which are otherwise restarted as they are) and started again. Its
// engine, with its episodes and its camera fault, stays. While it is dead
// the camera is reported degraded (Health), the other cameras go on, and
// the unit is not restarted. Scheduler goroutine only.
func (p *Pipeline) superviseCameras(now time.Time, rs *runState) {
	after := p.restartAfter()
	if after <= 0 {
		return
	}
	for _, c := range p.cams {
		if c.ended || c.restarting {
			continue
		}
		last := max(c.metrics.lastFrame.Load(), p.runStart.Load(), c.lastRestartNS.Load(), c.addedNS.Load())
		dead := now.Sub(time.Unix(0, last))
		if dead < after {
			continue
		}
		c.restarting = true
		c.gen.Add(1) // what the old fetcher still sends is ignored
		c.lastRestartNS.Store(now.UnixNano())
		n := c.restarts.Add(1)
		p.log.Warn("camera dead: restarting its source in the process", "camera", c.spec.Name,
			"no_frame_for", dead.Round(time.Millisecond), "restarts", n, "limit", after.String()+" (pipeline.camera_restart)")
		stop, stopped := c.stop, c.stopped
		idx, name, spec, owned := c.idx, c.spec.Name, c.spec, c.owned
		log := p.log
		rs.wg.Go(func() {
			stop()
			<-stopped
			r := restartResult{cam: c}
			switch {
			case owned:
				r.src, r.rtsp, r.err = openSource(spec, log)
			case p.opts.OpenSource != nil:
				r.src, r.err = p.opts.OpenSource(idx, name)
			}
			rs.restarted <- r // buffered: one restart per camera at a time
		})
	}
}

// restarted installs a restarted camera's source and starts it again.
// Scheduler goroutine only.
func (p *Pipeline) restarted(rs *runState, r restartResult) {
	c := r.cam
	c.restarting = false
	if c.removed {
		return // removed while its source was being reopened
	}
	if r.err != nil {
		p.log.Error("camera restart failed; trying again", "camera", c.spec.Name, "err", r.err, "retry_in", p.restartAfter())
		return
	}
	if r.src != nil {
		c.srcMu.Lock()
		if c.rtsp != nil {
			st := c.rtsp.Stats()
			c.baseDecode += st.DecodeErrors
			c.baseFailures += st.Failures
		}
		c.src, c.rtsp = r.src, r.rtsp
		c.srcMu.Unlock()
	}
	c.srcErr.Store(false)
	p.startCamera(rs, c)
	p.log.Info("camera source restarted", "camera", c.spec.Name, "restarts", c.restarts.Load())
}

// openSource opens the source a camera spec describes: an image sequence,
// or an RTSP client (rtsp set; its Run must be started).
func openSource(cs runconfig.CameraSpec, log *slog.Logger) (camera.Source, *camera.RTSPSource, error) {
	s := cs.Source
	if s.Sequence != nil {
		src, err := camera.NewImageSequence(camera.SequenceConfig{Dir: s.Sequence.Dir, FPS: s.Sequence.FPS, Loop: s.Sequence.Loop, SourceID: cs.Name})
		if err != nil {
			return nil, nil, fmt.Errorf("%s.sequence: %w", cs.Key, err)
		}
		return src, nil, nil
	}
	src, err := camera.NewRTSPSource(camera.RTSPConfig{URL: s.URL, SourceID: cs.Name, UDP: s.UDP,
		StallTimeout: s.StallTimeout, BackoffMin: s.BackoffMin, BackoffMax: s.BackoffMax,
		RequestTimeout: s.RequestTimeout, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("%s.url: %w", cs.Key, err)
	}
	return src, src, nil
}
