package alerts_test

import (
	"fmt"

	"github.com/didoedge/didoedge/alerts"
)

// A control request gives an events key in seconds: the bound is checked
// before the value becomes a duration.
func ExampleEventBound_Seconds() {
	b, _ := alerts.EventBoundOf("camera_stall")
	for _, s := range []float64{2, 0, 1e-9, 1e10} {
		d, err := b.Seconds("alerts.events.camera_stall", s)
		fmt.Println(d, err)
	}
	// Output:
	// 2s <nil>
	// 0s <nil>
	// 0s alerts.events.camera_stall: 1ns is below 500ms (0: off)
	// 0s alerts.events.camera_stall: 1e+10s is above 1h0m0s
}
