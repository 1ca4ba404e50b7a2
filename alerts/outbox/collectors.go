package outbox

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/didoedge/didoedge/internal/promfunc"
)

// Collectors are the outbox's Prometheus metrics, read from stats at
// scrape time (the owner of the outbox passes its Stats method, so that a
// reader never blocks a writer).
func Collectors(stats func() Stats) []prometheus.Collector {
	return []prometheus.Collector{
		promfunc.Flag("didoedge_outbox_write_fault", "1 while the outbox cannot store events (its last write failed); new events are not queued.",
			func() bool { return stats().WriteFault }),
		promfunc.Flag("didoedge_outbox_disk_full", "1 while the outbox's last write failed with ENOSPC.", func() bool { return stats().DiskFull }),
		promfunc.Counter("didoedge_outbox_lost_events_total", "Pending events destroyed by damaged outbox records, found on recovery at start.",
			func() uint64 { return stats().LostRecords }),
		promfunc.Counter("didoedge_outbox_dropped_updates_total", "Pending update events dropped to make room in a full outbox.",
			func() uint64 { return stats().DroppedUpdates }),
		promfunc.Counter("didoedge_outbox_refused_total", "Events refused because the outbox was full of undroppable events.",
			func() uint64 { return stats().Refused }),
		promfunc.Counter("didoedge_outbox_not_written_total", "Events whose outbox write or fsync failed (disk full, I/O error).",
			func() uint64 { return stats().NotWritten }),
	}
}
