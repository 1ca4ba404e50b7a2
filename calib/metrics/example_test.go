package metrics_test

import (
	"fmt"

	"github.com/didoedge/didoedge/calib/metrics"
)

// A relative model's output r = 2/d + 0.1 on three ground-truth pixels is
// aligned back to metres: s = 1/2, t = -0.05.
func ExampleAlignInverseDepth() {
	gt := []float32{2, 4, 10, 0}
	r := make([]float32, len(gt))
	for i, y := range gt {
		if y > 0 {
			r[i] = 2/y + 0.1
		}
	}
	a, err := metrics.AlignInverseDepth(r, gt)
	if err != nil {
		fmt.Println(err)
		return
	}
	d := make([]float32, len(r))
	a.Apply(r[:3], d[:3], 80)
	fmt.Printf("s %.3f t %.3f over %d pixels: depth %.2f %.2f %.2f\n", a.S, a.T, a.N, d[0], d[1], d[2])
	// Output:
	// s 0.500 t -0.050 over 3 pixels: depth 2.00 4.00 10.00
}
