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
	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

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
	for _, shift := range []simrig.Phase{
		{Name: "indoor", World: sim.WorldIndoor, Duration: 8 * time.Second},
		{Name: "heavy fog", World: sim.WorldOutdoor, Fog: 0.12, Duration: 8 * time.Second},
	} {
		t.Run(shift.Name, func(t *testing.T) {
			phases := []simrig.Phase{
				{Name: "outdoor", World: sim.WorldOutdoor, Duration: 10 * time.Second},
				shift,
				{Name: "outdoor again", World: sim.WorldOutdoor, Duration: time.Hour},
			}
			o := Options{ModelsDir: models, WorkDir: t.TempDir(), BrokerListen: "127.0.0.1:0",
				HTTP: runconfig.HTTPOff, Phases: phases, Calibration: calibration}
			cam, err := simrig.StartCamera(o.Rig(), spec.Input.Width, spec.Input.Height)
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
