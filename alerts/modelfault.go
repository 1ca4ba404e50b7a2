package alerts

import (
	"errors"
	"strconv"
)

// KindModelFault marks an episode during which the models gave the
// camera's frames no usable output: the camera delivers, but nothing is
// assessed, so the vehicle is as blind as with a stalled camera, for
// another reason and with another remedy (the model or its provider, not
// the camera). It is never reported as a camera stall.
const KindModelFault EventKind = "model_fault"

// Model fault codes (Event.Fault).
const (
	// FaultModelNonFinite: an output held NaN or Inf (on a GPU, fp16
	// overflow is the usual cause).
	FaultModelNonFinite = "model_non_finite"
	// FaultModelRun: the model's run failed (a provider error: out of
	// memory, a lost device, an engine build).
	FaultModelRun = "model_run_failed"
)

// modelFaultState is the engine's open model-fault episode.
type modelFaultState struct {
	open  bool
	id    string
	start int64 // unix ms
	code  string
}

// ObserveFault records frame f, which the camera delivered but the models
// could not assess (code: FaultModelNonFinite or FaultModelRun). The camera
// is alive, so a camera-fault episode ends and the stall clock restarts;
// the first such frame opens a model_fault episode (critical), which ends
// at the next frame that Observe assesses. Zone episodes are left as they
// are: without maps there is nothing to fuse.
func (e *Engine) ObserveFault(f Frame, code string) error {
	if code != FaultModelNonFinite && code != FaultModelRun {
		return errors.New("observe fault: unknown fault code " + strconv.Quote(code))
	}
	now := e.cfg.Now()
	e.version++
	if e.haveSeq && f.Seq > e.lastSeq+1 {
		e.dropped += f.Seq - e.lastSeq - 1
	}
	e.lastSeq, e.haveSeq = f.Seq, true
	e.lastFrameAt, e.lastCapture = now, f.Capture
	tms := f.Capture.UnixMilli()
	evs := e.events[:0]
	if e.stalled {
		e.stalled = false
		evs = append(evs, e.faultEvent(EventEnd, LevelOK, LevelCritical, tms, f.Seq))
	}
	if !e.mfault.open {
		e.counter++
		e.mfault = modelFaultState{open: true, start: tms, code: code,
			id: e.cfg.Camera + "-model-" + strconv.FormatInt(tms, 10) + "-" + strconv.FormatUint(e.counter, 10)}
		evs = append(evs, e.modelFaultEvent(EventNew, LevelCritical, LevelOK, tms, f.Seq))
	}
	e.events = evs
	var errs []error
	for i := range evs {
		if err := e.sink.Event(&evs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ModelFaulted reports whether a model_fault episode is open.
func (e *Engine) ModelFaulted() bool { return e.mfault.open }

// modelFaultEvent is an event of the open model-fault episode.
func (e *Engine) modelFaultEvent(t EventType, level, prev Level, tms int64, frame uint64) Event {
	return Event{Schema: EventSchemaID, ID: e.mfault.id, Type: t, Kind: KindModelFault,
		Vehicle: e.cfg.Vehicle, Camera: e.cfg.Camera, Fault: e.mfault.code,
		Level: level, Previous: prev, Reasons: []string{e.mfault.code},
		StartMS: e.mfault.start, TimeMS: tms, FrameSeq: frame}
}

// endModelFault appends the end of an open model-fault episode to evs and
// closes it.
func (e *Engine) endModelFault(evs []Event, tms int64, frame uint64) []Event {
	if !e.mfault.open {
		return evs
	}
	evs = append(evs, e.modelFaultEvent(EventEnd, LevelOK, LevelCritical, tms, frame))
	e.mfault.open = false
	return evs
}
