package snapshot

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the renderer's Prometheus counters, read at scrape time.
func (s *Sink) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "didoedge_snapshots_skipped_total", Help: "Event snapshots not taken: the renderer was behind."},
			func() float64 { return float64(s.Skipped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "didoedge_snapshots_failed_total", Help: "Event snapshots that could not be rendered or stored."},
			func() float64 { return float64(s.Failed()) }),
	}
}
