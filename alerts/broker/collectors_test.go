package broker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCollectorsReadStatsAtScrape: every counter reads its own field of
// the stats at scrape time (distinct values, changed after registration).
func TestCollectorsReadStatsAtScrape(t *testing.T) {
	var st Stats
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collectors(func() Stats { return st })...)
	st = Stats{Refused: 1, IdleClosed: 2, AuthFailed: 3, Denied: 4, RateLimited: 5,
		Store: StoreStats{DroppedUpdates: 6, Refused: 7, Damaged: 8, WriteErrors: 9}}
	want := map[string]float64{
		"didoedge_broker_connections_refused_total":   1,
		"didoedge_broker_idle_closed_total":           2,
		"didoedge_broker_auth_failures_total":         3,
		"didoedge_broker_acl_denied_total":            4,
		"didoedge_broker_rate_limited_total":          5,
		"didoedge_broker_store_dropped_updates_total": 6,
		"didoedge_broker_store_refused_total":         7,
		"didoedge_broker_store_damaged_total":         8,
		"didoedge_broker_store_write_errors_total":    9,
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != len(want) {
		t.Fatalf("%d metrics, want %d", len(mfs), len(want))
	}
	for _, mf := range mfs {
		w, ok := want[mf.GetName()]
		if !ok {
			t.Errorf("unexpected metric %s", mf.GetName())
			continue
		}
		if got := mf.GetMetric()[0].GetCounter().GetValue(); mf.GetType().String() != "COUNTER" || got != w {
			t.Errorf("%s: %s %v, want counter %v", mf.GetName(), mf.GetType(), got, w)
		}
	}
}
