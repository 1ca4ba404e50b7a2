package stream

import (
	"errors"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/prometheus/client_golang/prometheus"
)

// modelFault handles a frame that the camera delivered but the models
// could not assess: a NaN/Inf output (on a GPU, fp16 overflow is the usual
// cause) or a failed run that runtime/infer's fault policy could not
// recover (infer.ModelFault). It is counted (didoedge_model_faults_total;
// NaN/Inf also in didoedge_frames_invalid_total), logged at most once per
// interval per camera and fault, and raised as the camera engine's
// model_fault episode and a degraded health reason: never as a camera
// stall, because the camera is alive and a restart of it (or of the unit)
// would not mend the model. It reports false for any other error.
func (c *cameraPipe) modelFault(f *camera.Frame, err error) bool {
	var code string
	var mf *infer.ModelFault
	switch {
	case errors.Is(err, ErrInvalidOutput):
		code = alerts.FaultModelNonFinite
		c.metrics.Invalid.Add(1)
	case errors.As(err, &mf) && mf.Kind == infer.FaultRun:
		code = alerts.FaultModelRun
	default:
		return false
	}
	c.metrics.ModelFaults.Add(1)
	c.metrics.lastFault.Store(time.Now().UnixNano())
	detail := code + ": " + err.Error()
	c.faultDetail.Store(&detail)
	c.rl.Warn("model fault "+code+" "+c.spec.Name, "model fault: frame not assessed", "camera", c.spec.Name, "frame", f.Seq,
		"fault", code, "err", err, "model_faults_total", c.metrics.ModelFaults.Load())
	if e := c.engine.ObserveFault(alerts.Frame{Seq: f.Seq, Capture: f.Capture}, code); e != nil {
		c.engineError(f.Seq, e)
	}
	return true
}

// modelHealth says whether the camera's newest frame was assessed (true),
// or was a model fault that no assessed frame followed, with its detail.
func (c *cameraPipe) modelHealth() (ok bool, detail string) {
	if c.metrics.lastFault.Load() <= c.metrics.lastFrame.Load() {
		return true, ""
	}
	if d := c.faultDetail.Load(); d != nil {
		return false, "model fault (frames delivered, not assessed): " + *d
	}
	return false, "model fault (frames delivered, not assessed)"
}

// modelCollectors are the sessions' fault-policy counters (runtime/infer:
// run faults, frames a retry recovered, sessions rebuilt on the next
// provider, rebuilds that failed), labelled by model, read at scrape time.
func modelCollectors(depth, aux *infer.Session) []prometheus.Collector {
	var cs []prometheus.Collector
	for _, m := range []struct {
		role string
		s    *infer.Session
	}{{"depth", depth}, {"auxue", aux}} {
		s := m.s
		for _, c := range []struct {
			name, help string
			fn         func(infer.FaultStats) uint64
		}{
			{"didoedge_model_run_faults_total", "Runs ONNX Runtime failed (first try of a frame).", func(f infer.FaultStats) uint64 { return f.RunFaults }},
			{"didoedge_model_recovered_total", "Failed runs whose retry succeeded.", func(f infer.FaultStats) uint64 { return f.Recovered }},
			{"didoedge_model_rebuilds_total", "Sessions rebuilt after a failed retry (on the next provider, or the same one when it is required or last).", func(f infer.FaultStats) uint64 { return f.Rebuilds }},
			{"didoedge_model_rebuild_failures_total", "Session rebuilds that failed (the old session is kept).", func(f infer.FaultStats) uint64 { return f.RebuildFailures }},
		} {
			fn := c.fn
			cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help, ConstLabels: prometheus.Labels{"model": m.role}},
				func() float64 { return float64(fn(s.Faults())) }))
		}
	}
	return cs
}
