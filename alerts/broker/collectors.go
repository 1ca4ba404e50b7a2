package broker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/didoedge/didoedge/internal/promfunc"
)

// Collectors are the embedded broker's Prometheus counters, read from
// stats at scrape time.
func Collectors(stats func() Stats) []prometheus.Collector {
	return []prometheus.Collector{
		promfunc.Counter("didoedge_broker_connections_refused_total", "Embedded broker: connections closed at the connection limit.",
			func() uint64 { return stats().Refused }),
		promfunc.Counter("didoedge_broker_idle_closed_total", "Embedded broker: connections closed for sending no CONNECT in time.",
			func() uint64 { return stats().IdleClosed }),
		promfunc.Counter("didoedge_broker_auth_failures_total", "Embedded broker: CONNECTs refused (credentials, forbidden will).",
			func() uint64 { return stats().AuthFailed }),
		promfunc.Counter("didoedge_broker_acl_denied_total", "Embedded broker: publishes and subscriptions the ACL refused.",
			func() uint64 { return stats().Denied }),
		promfunc.Counter("didoedge_broker_rate_limited_total", "Embedded broker: publishes dropped over the message rate.",
			func() uint64 { return stats().RateLimited }),
		// The store's bound: drops of droppable messages, and never-dropped
		// events not queued for a client.
		promfunc.Counter("didoedge_broker_store_dropped_updates_total", "Embedded broker: queued updates and states dropped (oldest first) to make room in a full store.",
			func() uint64 { return stats().Store.DroppedUpdates }),
		promfunc.Counter("didoedge_broker_store_refused_total", "Embedded broker: new/end/fault events not queued for a client because the store was full of such events.",
			func() uint64 { return stats().Store.Refused }),
		promfunc.Counter("didoedge_broker_store_damaged_total", "Embedded broker: stores found damaged or empty at start, moved aside and replaced by a fresh one (the ERROR log line says what was lost).",
			func() uint64 { return stats().Store.Damaged }),
		promfunc.Counter("didoedge_broker_store_write_errors_total", "Embedded broker: store writes that failed (events stay in the outbox).",
			func() uint64 { return stats().Store.WriteErrors }),
	}
}
