package outbox

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the outbox's Prometheus metrics, read from stats at
// scrape time (the owner of the outbox passes its Stats method, so that a
// reader never blocks a writer).
func Collectors(stats func() Stats) []prometheus.Collector {
	gauge := func(name, help string, fn func(Stats) bool) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if fn(stats()) {
				return 1
			}
			return 0
		})
	}
	counter := func(name, help string, fn func(Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(fn(stats())) })
	}
	return []prometheus.Collector{
		gauge("didoedge_outbox_write_fault", "1 while the outbox cannot store events (its last write failed); new events are not queued.",
			func(s Stats) bool { return s.WriteFault }),
		gauge("didoedge_outbox_disk_full", "1 while the outbox's last write failed with ENOSPC.", func(s Stats) bool { return s.DiskFull }),
		counter("didoedge_outbox_lost_events_total", "Pending events destroyed by damaged outbox records, found on recovery at start.",
			func(s Stats) uint64 { return s.LostRecords }),
		counter("didoedge_outbox_dropped_updates_total", "Pending update events dropped to make room in a full outbox.",
			func(s Stats) uint64 { return s.DroppedUpdates }),
		counter("didoedge_outbox_refused_total", "Events refused because the outbox was full of undroppable events.",
			func(s Stats) uint64 { return s.Refused }),
		counter("didoedge_outbox_not_written_total", "Events whose outbox write or fsync failed (disk full, I/O error).",
			func(s Stats) uint64 { return s.NotWritten }),
	}
}
