package demo

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

func TestScenarioPhases(t *testing.T) {
	phases := []Phase{
		{Name: "a", World: sim.WorldOutdoor, Duration: 2 * time.Second},
		{Name: "b", World: sim.WorldOutdoor, Fog: 0.1, Duration: time.Second},
		{Name: "c", World: sim.WorldIndoor, Duration: 500 * time.Millisecond},
	}
	sc, err := NewScenario(phases, 10, 64, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 10 fps: frames 0-19 a, 20-29 b, 30-34 c, then the loop (35 frames).
	for _, tc := range []struct{ frame, phase int }{{0, 0}, {19, 0}, {20, 1}, {29, 1}, {30, 2}, {34, 2}, {35, 0}, {55, 1}} {
		if got := sc.PhaseAt(tc.frame); got != tc.phase {
			t.Errorf("frame %d: phase %d, want %d", tc.frame, got, tc.phase)
		}
	}
	if len(sc.renderers) != 3 || sc.renderers[0] == sc.renderers[1] {
		t.Fatal("fog and clear phases must have their own renderers")
	}
	// Fog changes the picture of the same frame; the depth world is the same.
	clear, fog := make([]uint8, 64*32*3), make([]uint8, 64*32*3)
	if err := sc.Render(5, clear); err != nil {
		t.Fatal(err)
	}
	if err := sc.renderers[1].Render(5, sc.frame); err != nil {
		t.Fatal(err)
	}
	copy(fog, sc.frame.RGB)
	if slices.Equal(clear, fog) {
		t.Fatal("heavy fog renders the same image as clear air")
	}
	if _, err := NewScenario(nil, 10, 64, 32, 1); err == nil {
		t.Fatal("empty scenario accepted")
	}
	// A corrupted phase shares the clear renderer and changes the picture
	// (night: darker on average).
	dark, err := NewScenario([]Phase{{Name: "clear", World: sim.WorldOutdoor, Duration: time.Second},
		{Name: "night", World: sim.WorldOutdoor, Duration: time.Second, Corruption: "dark", Severity: 4}}, 10, 64, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	night := make([]uint8, 64*32*3)
	if err := dark.Render(3, clear); err != nil {
		t.Fatal(err)
	}
	if err := dark.Render(13, night); err != nil {
		t.Fatal(err)
	}
	sum := func(b []uint8) (n int) {
		for _, v := range b {
			n += int(v)
		}
		return n
	}
	if dark.renderers[0] != dark.renderers[1] || 2*sum(night) > sum(clear) {
		t.Fatalf("night phase: shared renderer %v, brightness %d vs clear %d", dark.renderers[0] == dark.renderers[1], sum(night), sum(clear))
	}
	if _, err := NewScenario([]Phase{{Name: "x", World: sim.WorldOutdoor, Duration: time.Second, Corruption: "rain", Severity: 3}}, 10, 64, 32, 1); err == nil ||
		!strings.Contains(err.Error(), "rain") {
		t.Fatalf("unknown corruption: %v", err)
	}
}

// TestScenarioNewCameraPhase: a new-camera phase has its own renderer
// with the new camera's intrinsics at the scenario's frame size, and frame
// i of it is that camera's frame i of the same drive.
func TestScenarioNewCameraPhase(t *testing.T) {
	sc, err := NewScenario([]Phase{{Name: "clear", World: sim.WorldOutdoor, Duration: time.Second},
		{Name: "new camera", World: sim.WorldOutdoor, Duration: time.Second, Camera: sim.CameraNewCam}}, 10, 64, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	if sc.renderers[0] == sc.renderers[1] {
		t.Fatal("the new-camera phase shares the training camera's renderer")
	}
	cam, _ := sim.LookupCamera(sim.CameraNewCam)
	wfx, wfy, wcx, wcy := cam.Intrinsics(64, 32, 0)
	if fx, fy, cx, cy := sc.renderers[1].Intrinsics(); fx != wfx || fy != wfy || cx != wcx || cy != wcy {
		t.Fatalf("new-camera phase intrinsics (%v %v %v %v), want (%v %v %v %v)", fx, fy, cx, cy, wfx, wfy, wcx, wcy)
	}
	got := make([]uint8, 64*32*3)
	if err := sc.Render(13, got); err != nil {
		t.Fatal(err)
	}
	r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: 64, Height: 32, Seed: 1, Camera: sim.CameraNewCam})
	if err != nil {
		t.Fatal(err)
	}
	f := sim.NewFrame(64, 32)
	if err := r.Render(13, f); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, f.RGB) {
		t.Fatal("frame 13 of the new-camera phase is not the new camera's frame 13")
	}
	if _, err := NewScenario([]Phase{{Name: "x", World: sim.WorldOutdoor, Duration: time.Second, Camera: "fisheye"}}, 10, 64, 32, 1); err == nil ||
		!strings.Contains(err.Error(), "fisheye") {
		t.Fatalf("unknown camera: %v", err)
	}
}

// TestMissingModelsNameTheCommand: without reference models the demo
// says which file is missing and which command builds it.
func TestMissingModelsNameTheCommand(t *testing.T) {
	dir := t.TempDir()
	err := CheckModels(dir)
	if err == nil {
		t.Fatal("empty models directory accepted")
	}
	for _, want := range []string{filepath.Join(dir, Manifest), "didoedge train depth", "didoedge train auxue"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not mention %q", err, want)
		}
	}
}

// referenceModels returns the repository's models/ directory (or
// $DIDOEDGE_REFERENCE_MODELS), failing (not skipping) when the reference
// models are absent.
func referenceModels(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "models")
	if d := os.Getenv("DIDOEDGE_REFERENCE_MODELS"); d != "" {
		dir = d
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckModels(dir); err != nil {
		t.Fatalf("this test needs the trained reference models (random weights cannot tell in- from out-of-distribution; DIDOEDGE_REFERENCE_MODELS=DIR points elsewhere): %v", err)
	}
	return dir
}

// TestScenarioRaisesEpistemicEvents plays outdoor driving, then switches
// the simulated camera mid-stream to the indoor world and to heavy fog:
// a critical event for the out-of-distribution criterion must follow on
// some zone within 1 s of the first such frame, and every episode must end
// after the camera is back outdoors.
func TestScenarioRaisesEpistemicEvents(t *testing.T) {
	models := referenceModels(t)
	ref, err := ReadReference(models)
	if err != nil {
		t.Fatal(err)
	}
	spec := ref.Depth
	calibration := filepath.Join(models, CalibrationFn)
	if _, err := os.Stat(calibration); err != nil {
		calibration = calibrateForTest(t, models)
	}
	for _, shift := range []Phase{
		{Name: "indoor", World: sim.WorldIndoor, Duration: 8 * time.Second},
		{Name: "heavy fog", World: sim.WorldOutdoor, Fog: 0.12, Duration: 8 * time.Second},
	} {
		t.Run(shift.Name, func(t *testing.T) {
			phases := []Phase{
				{Name: "outdoor", World: sim.WorldOutdoor, Duration: 10 * time.Second},
				shift,
				{Name: "outdoor again", World: sim.WorldOutdoor, Duration: time.Hour},
			}
			o := Options{ModelsDir: models, WorkDir: t.TempDir(), BrokerListen: "127.0.0.1:0",
				HTTP: runconfig.HTTPOff, Phases: phases, Calibration: calibration}
			cam, err := StartCamera(o, spec.Input.Width, spec.Input.Height)
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
				mu.Lock()
				events = append(events, seen{*ev, time.Now()})
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			deadline := time.Now().Add(45 * time.Second)
			var shiftAt, backAt time.Time
			for time.Now().Before(deadline) && backAt.IsZero() {
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
				t.Fatal("the scenario did not reach its last phase in 45 s")
			}
			time.Sleep(8 * time.Second) // episodes end: fusion, exit inertia, minimum episode, merge window
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			open := map[string]bool{}
			var detected time.Duration = -1
			for _, s := range events {
				if s.ev.Kind != alerts.KindZone {
					continue
				}
				t.Logf("%+8.3fs %s", s.at.Sub(shiftAt).Seconds(), stream.FormatEvent(&s.ev))
				if s.at.Before(shiftAt) && s.ev.Level == alerts.LevelCritical && slices.Contains(s.ev.Reasons, "ood_fraction") {
					t.Errorf("out-of-distribution event before the switch, on in-distribution frames: %s", stream.FormatEvent(&s.ev))
				}
				if detected < 0 && !s.at.Before(shiftAt) && s.ev.Level == alerts.LevelCritical && slices.Contains(s.ev.Reasons, "ood_fraction") {
					detected = s.at.Sub(shiftAt)
				}
				switch s.ev.Type {
				case alerts.EventNew:
					open[s.ev.Zone] = true
				case alerts.EventEnd:
					delete(open, s.ev.Zone)
				}
			}
			if detected < 0 {
				t.Fatalf("no critical ood_fraction event after switching to %s (%d events)", shift.Name, len(events))
			}
			t.Logf("%s: critical ood_fraction event %v after the first %s frame", shift.Name, detected.Round(time.Millisecond), shift.Name)
			if detected > time.Second {
				t.Errorf("critical event %v after the switch, want within 1 s", detected)
			}
			if len(open) > 0 {
				t.Errorf("episodes still open 8 s after returning outdoors: %v", open)
			}
		})
	}
}

// calibrateForTest sets the thresholds like the demo does without
// models/calibration.yaml: calibration on freshly rendered in-distribution
// frames at a 1 % target false-alarm rate.
func calibrateForTest(t *testing.T, models string) string {
	t.Helper()
	path, res, err := CalibrateOnSim(context.Background(), Options{ModelsDir: models, WorkDir: t.TempDir()}, 12, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("calibrated on %d rendered frames: tau_e %.4g, scale correction %.4g", res.Frames, res.Calibration.TauE, res.Calibration.ScaleCorrection)
	return path
}

// TestCalibrateOnSim calibrates seeded test models on rendered frames, as
// the demo does without models/calibration.yaml.
func TestCalibrateOnSim(t *testing.T) {
	models := t.TempDir()
	testmodels.WriteReference(t, models)
	path, res, err := CalibrateOnSim(context.Background(), Options{ModelsDir: models, WorkDir: t.TempDir()}, 4, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := alerts.LoadCalibration(path)
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames != 4 || cal.Levels.PessimisticDepth != nil || cal.Levels.OODFraction == nil || len(cal.TauEZones) != 4 ||
		!strings.Contains(cal.Meta["source"], "rendered outdoor frames") {
		t.Fatalf("calibration %+v (frames %d)", cal, res.Frames)
	}
}
