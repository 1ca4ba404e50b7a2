package snapshot

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/didoedge/didoedge/internal/promfunc"
)

// Collectors are the renderer's Prometheus counters, read at scrape time.
func (s *Sink) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		promfunc.Counter("didoedge_snapshots_skipped_total", "Event snapshots not taken: the renderer was behind.",
			s.Skipped),
		promfunc.Counter("didoedge_snapshots_failed_total", "Event snapshots that could not be rendered or stored.",
			s.Failed),
	}
}
