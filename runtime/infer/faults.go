package infer

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/didoedge/didoedge/internal/lograte"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// Fault kinds of a ModelFault.
const (
	// FaultRun: ONNX Runtime failed the run (a provider error: CUDA out of
	// memory, a kernel launch failure, a TensorRT engine that cannot be
	// built or loaded).
	FaultRun = "run"
	// FaultNonFinite: the run succeeded but an output of the frame held
	// NaN or Inf (fp16 overflow is the usual cause on a GPU).
	FaultNonFinite = "non_finite"
)

// ModelFault is the one error type of a model that failed a frame: which
// model, on which provider, why, and what the fault policy did. It wraps
// the reason, so errors.Is(err, ErrInvalidOutput) holds for a NaN/Inf
// frame.
//
// The policy for a run that ONNX Runtime fails (FaultRun):
//  1. the run is retried once at once on the same session (a transient
//     fault: a contended device, an allocation that fails once);
//  2. if the retry fails too, the session is rebuilt on the next provider
//     of inference.providers after the one in use; on the same provider
//     when that one is required (never left) or the last of the list.
//     The frame fails with the fault (Action says what was done); the
//     next frame runs on the rebuilt session. A rebuild keeps the
//     session's batch size and tensors (their memory may be another
//     session's input). A rebuild that fails keeps the old session, and
//     the next failing frame goes through the policy again.
//
// A NaN/Inf frame (FaultNonFinite) fails alone: the session is fine and
// the other frames of its batch keep their maps; it is counted per model
// (Session.Stats().FlaggedFrames) and logged rate-limited by Models.
type ModelFault struct {
	Model    string // "depth" or "auxue"
	Path     string // the model file
	Provider string // the provider the session ran on
	Kind     string // FaultRun or FaultNonFinite
	Err      error  // ONNX Runtime's error, or ErrInvalidOutput
	// Action is what the policy did (FaultRun): "retried once, then rebuilt
	// the session on cpu", or why the rebuild failed.
	Action string
}

func (f *ModelFault) Error() string {
	msg := fmt.Sprintf("model fault: %s model %q on %s: %s: %v", f.Model, f.Path, f.Provider, f.Kind, f.Err)
	if f.Action != "" {
		msg += "; " + f.Action
	}
	return msg
}

func (f *ModelFault) Unwrap() error { return f.Err }

// FaultStats are a session's cumulative fault-policy counters.
type FaultStats struct {
	RunFaults       uint64 // runs ONNX Runtime failed (the first try of a frame)
	Recovered       uint64 // of those, frames whose retry succeeded
	Rebuilds        uint64 // sessions rebuilt after a failed retry
	RebuildFailures uint64 // rebuilds that failed (the old session kept)
}

// faultState is a session's fault-policy state; fields other than the
// counters are guarded by the session's mutex.
type faultState struct {
	runFaults, recovered, rebuilds, rebuildFailures atomic.Uint64
	rl                                              *lograte.Limiter
	// inject makes the next runs fail in ONNX Runtime itself (tests):
	// they run with a RunOptions whose terminate flag is set.
	inject int
	term   *ort.RunOptions
}

func (f *faultState) close() error {
	if f.rl != nil {
		f.rl.Flush()
	}
	if f.term == nil {
		return nil
	}
	err := f.term.Destroy()
	f.term = nil
	return err
}

// Faults returns the session's fault-policy counters.
func (s *Session) Faults() FaultStats {
	return FaultStats{RunFaults: s.faults.runFaults.Load(), Recovered: s.faults.recovered.Load(),
		Rebuilds: s.faults.rebuilds.Load(), RebuildFailures: s.faults.rebuildFailures.Load()}
}

// role names the model for faults and logs.
func (s *Session) role() string {
	if s.spec.IsAuxUE() {
		return "auxue"
	}
	return "depth"
}

// limiter returns the session's rate limiter of fault log lines.
func (s *Session) limiter() *lograte.Limiter {
	if s.faults.rl == nil {
		s.faults.rl = lograte.New(s.log, 0)
	}
	return s.faults.rl
}

// runPolicy runs the bound tensors (batch n) and applies the fault policy
// (ModelFault) when ONNX Runtime fails the run. Called with s.mu held.
func (s *Session) runPolicy(n int) error {
	first := s.runOnce(n)
	if first == nil {
		return nil
	}
	s.faults.runFaults.Add(1)
	err := s.runOnce(n)
	if err == nil {
		s.faults.recovered.Add(1)
		s.limiter().Log(slog.LevelWarn, "run retried "+s.path, "model run failed, the retry succeeded",
			"model", s.role(), "path", s.path, "provider", s.provider, "err", oneLine(first))
		return nil
	}
	from := s.provider
	next := nextProvider(s.providers, s.providerIdx)
	action := "retried once, then rebuilt the session on " + s.providers[next].Name
	if rerr := s.rebuild(next); rerr != nil {
		s.faults.rebuildFailures.Add(1)
		action = fmt.Sprintf("retried once; rebuilding the session on %s failed (%v), the session on %s is kept", s.providers[next].Name, oneLine(rerr), from)
	} else {
		s.faults.rebuilds.Add(1)
	}
	f := &ModelFault{Model: s.role(), Path: s.path, Provider: from, Kind: FaultRun, Err: err, Action: action}
	s.limiter().Log(slog.LevelError, "model fault "+s.path, "model fault", "model", s.role(), "path", s.path,
		"provider", from, "kind", FaultRun, "err", oneLine(err), "action", action, "now_on", s.provider)
	return f
}

// nextProvider is the index of the provider a failed session is rebuilt
// on: the one after cur, unless cur is required or the last (then cur).
func nextProvider(ps []onnxrt.ProviderConfig, cur int) int {
	if ps[cur].Required || cur+1 >= len(ps) {
		return cur
	}
	return cur + 1
}

// runOnce is one run of ONNX Runtime on the bound tensors.
func (s *Session) runOnce(n int) error {
	var err error
	switch {
	case s.faults.inject > 0 && s.dev != nil:
		s.faults.inject--
		err = s.dev.run(n, true)
	case s.faults.inject > 0:
		s.faults.inject--
		err = s.runTerminated(n)
	case s.dev != nil:
		err = s.dev.run(n, false)
	case s.dyn != nil:
		if s.providers[s.providerIdx].GPU() {
			err = s.rebindInputs(n)
		}
		if err == nil {
			err = s.dyn.RunWithBinding(s.bindings[n-1])
		}
	default:
		err = s.sess.Run()
	}
	if err != nil {
		return fmt.Errorf("run model %q on %s: %w", s.path, s.provider, err)
	}
	return nil
}

// runTerminated runs with the terminate flag set, so that ONNX Runtime
// itself fails the run ("Exiting due to terminate flag being set to
// true"): the injected fault of the tests.
func (s *Session) runTerminated(n int) error {
	if s.faults.term == nil {
		t, err := ort.NewRunOptions()
		if err != nil {
			return err
		}
		if err := t.Terminate(); err != nil {
			t.Destroy()
			return err
		}
		s.faults.term = t
	}
	var err error
	if s.dyn != nil {
		vals := s.batchVals[n-1]
		ins := make([]ort.Value, len(s.inputs))
		outs := make([]ort.Value, len(vals)-len(s.inputs))
		for i := range ins {
			ins[i] = vals[i]
		}
		for i := range outs {
			outs[i] = vals[len(ins)+i]
		}
		err = s.dyn.RunWithOptions(ins, outs, s.faults.term)
	} else {
		err = s.sess.RunWithOptions(s.faults.term)
	}
	if err == nil {
		return errors.New("injected fault: ONNX Runtime ran despite its terminate flag")
	}
	return err
}

// injectRunFailures makes the next k runs fail inside ONNX Runtime.
func (s *Session) injectRunFailures(k int) {
	s.mu.Lock()
	s.faults.inject = k
	s.mu.Unlock()
}

// rebuild replaces the ONNX Runtime session by one on provider idx, over
// the same tensors and with the same batch size. On failure the old
// session stays in use.
func (s *Session) rebuild(idx int) error {
	// The device bindings belong to the old OrtSession: the rebuilt
	// session runs on the host path (Models turns it off for both).
	s.closeDevice()
	old := s.takeSessions()
	if err := s.open(s.providers[idx], s.maxBatch); err != nil {
		s.destroySessions()
		s.putSessions(old)
		return err
	}
	cur := s.takeSessions()
	s.putSessions(old)
	err := s.destroySessions()
	s.putSessions(cur)
	s.provider, s.providerIdx = s.providers[idx].Name, idx
	s.log.Info("model session rebuilt", "model", s.path, "provider", s.provider, "nodes", s.placement.String())
	return err
}

// sessions is the ONNX Runtime part of a Session that a rebuild swaps.
type sessions struct {
	sess      *ort.AdvancedSession
	dyn       *ort.DynamicAdvancedSession
	bindings  []*ort.IoBinding
	batchVals [][]*ort.Tensor[float32]
	batchIns  [][]ort.Value
	placement onnxrt.Placement
}

func (s *Session) takeSessions() sessions {
	o := sessions{s.sess, s.dyn, s.bindings, s.batchVals, s.batchIns, s.placement}
	s.sess, s.dyn, s.bindings, s.batchVals, s.batchIns, s.placement = nil, nil, nil, nil, nil, nil
	return o
}

func (s *Session) putSessions(o sessions) {
	s.sess, s.dyn, s.bindings, s.batchVals, s.batchIns, s.placement = o.sess, o.dyn, o.bindings, o.batchVals, o.batchIns, o.placement
}

// rebindInputs binds the inputs of batch n again, which on a GPU provider
// uploads their current values (Session.batchIns).
func (s *Session) rebindInputs(n int) error {
	names := s.spec.inputNames()
	for i, v := range s.batchIns[n-1] {
		if err := s.bindings[n-1].BindInput(names[i], v); err != nil {
			return fmt.Errorf("bind input %q: %w", names[i], err)
		}
	}
	return nil
}
