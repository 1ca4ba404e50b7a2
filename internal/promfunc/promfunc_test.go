package promfunc

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollectorsReadAtScrape(t *testing.T) {
	var n uint64 = 3
	on := false
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(
		Counter("t_events_total", "Events.", func() uint64 { return n }),
		Gauge("t_level", "Level.", func() float64 { return float64(n) / 2 }),
		Flag("t_fault", "Fault.", func() bool { return on }),
	)
	n, on = 7, true // changed after registration: read at scrape time
	want := `
# HELP t_events_total Events.
# TYPE t_events_total counter
t_events_total 7
# HELP t_fault Fault.
# TYPE t_fault gauge
t_fault 1
# HELP t_level Level.
# TYPE t_level gauge
t_level 3.5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
