package alerts_test

import (
	"fmt"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// An engine for one camera with one zone, delivering to a sink that
// prints what it gets: heavy fog for half a second gives one episode whose
// end waits out the exit inertia, the minimum episode and the merge window.
func ExampleNewEngine() {
	zones := []alerts.Zone{{Name: "lane", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}
	printer := alerts.SinkFuncs{OnEvent: func(ev *alerts.Event) error {
		fmt.Printf("%-6s %-8s frame %d %s\n", ev.Type, ev.Level, ev.FrameSeq, ev.Reasons)
		return nil
	}}
	timing := alerts.Timing{FusionTimeConstant: 100 * time.Millisecond, ExitInertia: 200 * time.Millisecond,
		MinEpisode: time.Second, MergeWindow: 500 * time.Millisecond}
	e, err := alerts.NewEngine(alerts.EngineSpec{
		Config:      alerts.EngineConfig{Vehicle: "van-07", Camera: "front", Timing: timing},
		Zones:       zones,
		Calibration: alerts.DefaultCalibration(), // tau_e 0.5, ood_fraction warn 0.05, critical 0.2
	}, printer)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := alerts.Maps{Width: 4, Height: 1, Epistemic: make([]float32, 4), Scale: make([]float32, 4), Depth: []float32{20, 20, 20, 20}}
	start := time.Unix(1_700_000_000, 0)
	for i := range 40 { // 10 fps: fog in frames 5..9
		for p := range m.Epistemic {
			m.Epistemic[p] = 0.1
			if i >= 5 && i < 10 {
				m.Epistemic[p] = 0.9 // K/S above tau_e: out of distribution
			}
		}
		if err := e.Observe(alerts.Frame{Seq: uint64(i), Capture: start.Add(time.Duration(i) * 100 * time.Millisecond)}, m); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// new    critical frame 5 [ood_fraction]
	// end    ok       frame 20 []
}
