package stream

import (
	"context"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
)

// Tap observes the pipeline's output for a live viewer (the Foxglove
// server of runtime/apps/live): every assessed frame that the tap wants,
// and every alert event and zone state. The core knows only this
// interface; the application that implements it is attached through
// Options.Tap.
//
// Wants is asked on the pipeline goroutine for every assessed frame and
// must be cheap and allocation-free (an atomic load): while it answers
// false, the frame costs the pipeline nothing more. Frame is then called
// on the pipeline goroutine with views that are valid only during the
// call; it must copy what it keeps and never block. Event and State (the
// alerts.Sink) are called from the pipeline goroutine after the durable
// MQTT sink (events carry their seq) and must not block either.
type Tap interface {
	Wants(camera string) bool
	Frame(f *TapFrame)
	alerts.Sink
}

// TapFrame is one assessed frame as a Tap sees it.
type TapFrame struct {
	Camera  string
	Seq     uint64
	Capture time.Time
	// The camera's frame, interleaved RGB8, Width x Height.
	Width, Height int
	RGB           []uint8
	// Maps are at the frame's size (Width x Height): the models' maps
	// resampled to the frame, as the alerts read them.
	Maps alerts.Maps
	// Zones are the camera's zones in assessment order (the slice is
	// replaced, never modified, by a reload: a tap may keep it); Status
	// is each zone's level, fused signals and episode after this frame
	// (valid during the call only); Risks the frame's raw zone metrics.
	Zones  []alerts.Zone
	Status []alerts.ZoneStatus
	Risks  []alerts.ZoneRisk
	// Domain is the camera's domain monitor after this frame (On false
	// when it has none).
	Domain DomainStatus
}

// tapFrame hands one assessed frame to the tap when it wants it; without
// a tap, or while the tap wants nothing of this camera, it does nothing
// and allocates nothing.
func (c *cameraPipe) tapFrame(f *camera.Frame, m alerts.Maps) {
	t := c.p.opts.Tap
	if t == nil || !t.Wants(c.spec.Name) {
		return
	}
	c.tap = TapFrame{Camera: c.spec.Name, Seq: f.Seq, Capture: f.Capture, Width: f.Width, Height: f.Height, RGB: f.RGB,
		Maps: m, Zones: c.engine.Zones(), Status: c.status, Risks: c.engine.LastRisks(),
		Domain: c.domainStatus()}
	t.Frame(&c.tap)
	c.tap = TapFrame{}
}

// tapSinks returns the tap as an alerts sink (none without a tap).
func tapSinks(t Tap) []alerts.Sink {
	if t == nil {
		return nil
	}
	return []alerts.Sink{t}
}

// Process runs one frame of camera i (config order) through every stage
// on the calling goroutine, as Run does for a frame it took. Benchmarks
// and tests use it to measure the frame path alone; never call it while
// Run runs.
func (p *Pipeline) Process(ctx context.Context, i int, f *camera.Frame) {
	p.cams[i].process(ctx, f)
}
