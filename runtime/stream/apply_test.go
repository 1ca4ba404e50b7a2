package stream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// gateTap is a Tap whose State blocks while armed: the scheduler, which
// republishes every zone's state inside Apply, then stays in the middle
// of an apply until the test releases it.
type gateTap struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gateTap) Wants(string) bool         { return false }
func (g *gateTap) Frame(*TapFrame)           {}
func (g *gateTap) Event(*alerts.Event) error { return nil }
func (g *gateTap) State(*alerts.State) error {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.release
	}
	return nil
}

// TestApplyOutlivesTheCaller: a caller that goes away (an HTTP client
// that disconnects: its request context ends) while the scheduler is
// applying its configuration gets the scheduler's answer, not its
// context's error, and the configuration is in force; a caller that goes
// away before the scheduler took its configuration gets its context's
// error and nothing of it is applied.
func TestApplyOutlivesTheCaller(t *testing.T) {
	requireORT(t)
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	cfg, err := runconfig.Load(s.config)
	if err != nil {
		t.Fatal(err)
	}
	tap := &gateTap{entered: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := New(ctx, cfg, Options{Source: camera.NewMailbox(), Tap: tap})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("Run did not return within 20 s")
		}
	}()
	withExit := func(d time.Duration) *runconfig.Config {
		next := *p.Config()
		next.AlertsConfig.Config.Events.ExitInertia = &d
		return &next
	}
	exitOf := func() time.Duration { return p.Config().AlertsConfig.Config.Events.Timing().ExitInertia }

	// Taken, then the caller goes away.
	first := withExit(3 * time.Second)
	callerCtx, callerGone := context.WithCancel(context.Background())
	answer := make(chan error, 1)
	tap.armed.Store(true)
	go func() { answer <- p.Apply(callerCtx, first) }()
	<-tap.entered // the scheduler is inside this apply
	callerGone()
	time.Sleep(50 * time.Millisecond) // an Apply that gave up on ctx has returned by now
	select {
	case err := <-answer:
		t.Fatalf("Apply returned %v while the scheduler was still applying", err)
	default:
	}
	close(tap.release)
	select {
	case err := <-answer:
		if err != nil {
			t.Fatalf("Apply after the caller went away: %v, want the scheduler's answer (nil)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Apply did not return within 5 s of the scheduler's answer")
	}
	if p.Config() != first || exitOf() != 3*time.Second {
		t.Fatalf("the applied configuration is not in force: exit_inertia %v", exitOf())
	}

	// Not taken yet (the scheduler is busy with another apply): the caller
	// goes away and nothing of its configuration applies.
	tap.release = make(chan struct{})
	tap.armed.Store(true)
	busy := withExit(4 * time.Second)
	go func() { answer <- p.Apply(context.Background(), busy) }()
	<-tap.entered
	late := withExit(5 * time.Second)
	lateCtx, lateGone := context.WithCancel(context.Background())
	lateAnswer := make(chan error, 1)
	go func() { lateAnswer <- p.Apply(lateCtx, late) }()
	time.Sleep(20 * time.Millisecond)
	lateGone()
	select {
	case err := <-lateAnswer:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Apply not taken, caller gone: %v, want context.Canceled", err)
		}
		testmodels.MustContain(t, err, "not taken by the pipeline, nothing changed")
	case <-time.After(5 * time.Second):
		t.Fatal("an Apply not taken did not return within 5 s of its caller going away")
	}
	close(tap.release)
	if err := <-answer; err != nil {
		t.Fatal(err)
	}
	if p.Config() != busy || exitOf() != 4*time.Second {
		t.Fatalf("in force: exit_inertia %v, want the busy apply's 4s (the late one was never taken)", exitOf())
	}
}
