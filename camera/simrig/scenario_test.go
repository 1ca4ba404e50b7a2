package simrig

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset/corrupt"
)

func TestScenarioPhases(t *testing.T) {
	phases := []Phase{
		{Name: "a", World: sim.WorldOutdoor, Duration: 2 * time.Second},
		{Name: "b", World: sim.WorldOutdoor, Fog: 0.1, Duration: time.Second},
		{Name: "c", World: sim.WorldIndoor, Duration: 500 * time.Millisecond},
	}
	sc, err := NewScenario(phases, 10, 64, 32, 1, corrupt.NewCorruptor())
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
	if _, err := NewScenario(nil, 10, 64, 32, 1, corrupt.NewCorruptor()); err == nil {
		t.Fatal("empty scenario accepted")
	}
	// A corrupted phase shares the clear renderer and changes the picture
	// (night: darker on average).
	dark, err := NewScenario([]Phase{{Name: "clear", World: sim.WorldOutdoor, Duration: time.Second},
		{Name: "night", World: sim.WorldOutdoor, Duration: time.Second, Corruption: "dark", Severity: 4}}, 10, 64, 32, 1, corrupt.NewCorruptor())
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
	if _, err := NewScenario([]Phase{{Name: "x", World: sim.WorldOutdoor, Duration: time.Second, Corruption: "rain", Severity: 3}}, 10, 64, 32, 1, corrupt.NewCorruptor()); err == nil ||
		!strings.Contains(err.Error(), "rain") {
		t.Fatalf("unknown corruption: %v", err)
	}
}

// TestScenarioNewCameraPhase: a new-camera phase has its own renderer
// with the new camera's intrinsics at the scenario's frame size, and frame
// i of it is that camera's frame i of the same drive.
func TestScenarioNewCameraPhase(t *testing.T) {
	sc, err := NewScenario([]Phase{{Name: "clear", World: sim.WorldOutdoor, Duration: time.Second},
		{Name: "new camera", World: sim.WorldOutdoor, Duration: time.Second, Camera: sim.CameraNewCam}}, 10, 64, 32, 1, corrupt.NewCorruptor())
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
	if _, err := NewScenario([]Phase{{Name: "x", World: sim.WorldOutdoor, Duration: time.Second, Camera: "fisheye"}}, 10, 64, 32, 1, corrupt.NewCorruptor()); err == nil ||
		!strings.Contains(err.Error(), "fisheye") {
		t.Fatalf("unknown camera: %v", err)
	}
}
