package demo

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

// TestScenarioDomainShift switches the simulated RTSP camera (15 fps,
// M-JPEG) from the training world to the "new camera" (the same roads
// through another lens, colour response and sensor: sim.CameraNewCam)
// and back, and likewise to the indoor world: the domain monitor (the
// reference AuxUE's training-domain record, the default 1 s window) must
// open exactly one domain_shift episode within 2 s of the switch, none
// before it, and end it within 2 s of the switch back.
func TestScenarioDomainShift(t *testing.T) {
	for _, shift := range []simrig.Phase{
		{Name: "new camera", World: sim.WorldOutdoor, Camera: sim.CameraNewCam, Duration: 6 * time.Second},
		{Name: "indoor", World: sim.WorldIndoor, Duration: 6 * time.Second},
	} {
		t.Run(shift.Name, func(t *testing.T) { testDomainShift(t, shift) })
	}
}

func testDomainShift(t *testing.T, shift simrig.Phase) {
	models := referenceModels(t)
	ref, err := ReadReference(models)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.AuxUE.DomainRecord(); err != nil {
		t.Fatalf("the reference AuxUE must carry a training-domain record: %v", err)
	}
	phases := []simrig.Phase{
		{Name: "outdoor", World: sim.WorldOutdoor, Duration: 6 * time.Second},
		shift,
		{Name: "outdoor again", World: sim.WorldOutdoor, Duration: time.Hour},
	}
	o := Options{ModelsDir: models, WorkDir: t.TempDir(), BrokerListen: "127.0.0.1:0", HTTP: runconfig.HTTPOff, Phases: phases, FPS: 15}
	cam, err := simrig.StartCamera(o.Rig(), ref.Depth.Input.Width, ref.Depth.Input.Height)
	if err != nil {
		t.Fatal(err)
	}
	defer cam.Server.Close()
	cfg, err := Config(o, cam.URL)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		ev alerts.Event
		at time.Time
	}
	var mu sync.Mutex
	var events []seen
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := stream.New(ctx, cfg, stream.Options{OnEvent: func(ev *alerts.Event) {
		if ev.Kind == alerts.KindDomainShift {
			mu.Lock()
			events = append(events, seen{*ev, time.Now()})
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var shiftAt, backAt time.Time
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline) && backAt.IsZero(); {
		time.Sleep(100 * time.Millisecond)
		for _, sw := range cam.Scenario.Switches() {
			if sw.Phase == 1 && shiftAt.IsZero() {
				shiftAt = sw.At
			}
			if sw.Phase == 2 && backAt.IsZero() {
				backAt = sw.At
			}
		}
	}
	if backAt.IsZero() {
		t.Fatal("the scenario did not reach its last phase in 40 s")
	}
	time.Sleep(3 * time.Second)
	health := p.Health()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var news, ends []seen
	for _, s := range events {
		t.Logf("%+8.3fs after the switch: %s distance %.3g smoothed %.3g threshold %.3g", s.at.Sub(shiftAt).Seconds(), stream.FormatEvent(&s.ev),
			s.ev.Domain.Distance, s.ev.Domain.Smoothed, s.ev.Domain.Threshold)
		switch s.ev.Type {
		case alerts.EventNew:
			news = append(news, s)
		case alerts.EventEnd:
			ends = append(ends, s)
		}
	}
	if len(news) != 1 || len(ends) != 1 {
		t.Fatalf("%d domain_shift episodes opened and %d ended, want exactly one of each", len(news), len(ends))
	}
	opened, ended := news[0].at.Sub(shiftAt), ends[0].at.Sub(backAt)
	t.Logf("domain_shift opened %v after the switch to %s, ended %v after the switch back", opened.Round(time.Millisecond), shift.Name, ended.Round(time.Millisecond))
	if opened < 0 || opened > 2*time.Second {
		t.Errorf("domain_shift opened %v after the switch, want within [0, 2 s]", opened)
	}
	if ended < 0 || ended > 2*time.Second {
		t.Errorf("domain_shift ended %v after the switch back, want within [0, 2 s]", ended)
	}
	for _, c := range health.Checks {
		if c.Name == "domain" && !c.OK {
			t.Errorf("domain check failed after the shift ended: %s", c.Detail)
		}
	}
}
