package domain_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/didoedge/didoedge/runtime/domain"
)

// Fit a record on in-domain statistics, take its threshold at a 1 %
// false-alarm rate, and watch a camera whose frames move away from the
// domain: the monitor's window mean crosses the threshold and the shift
// begins.
func Example() {
	l := domain.DefaultLayout(false)
	rng := rand.New(rand.NewPCG(1, 2))
	frame := func(offset float64) []float64 {
		x := make([]float64, l.Dim())
		for i := range x {
			x[i] = rng.NormFloat64() + offset
		}
		return x
	}
	var train [][]float64
	for range 100 {
		train = append(train, frame(0))
	}
	rec, err := domain.Fit(l, train, domain.FitOptions{Statistic: domain.KNN})
	if err != nil {
		fmt.Println(err)
		return
	}
	thr, _ := rec.Threshold(0.01)
	mon, _ := domain.NewMonitor(domain.MonitorConfig{Window: time.Second, Threshold: thr})
	sc := rec.NewScratch()
	t0 := time.Unix(0, 0)
	for i := range 30 {
		offset := 0.0
		if i >= 15 {
			offset = 3 // every statistic 3 standard deviations away
		}
		d, _ := rec.Distance(frame(offset), sc)
		if r := mon.Observe(t0.Add(time.Duration(i)*time.Second/15), d); r.Transition == domain.Began {
			fmt.Printf("shift began at frame %d (%d frames after the change)\n", i, i-15)
		}
	}
	// Output: shift began at frame 16 (1 frames after the change)
}
