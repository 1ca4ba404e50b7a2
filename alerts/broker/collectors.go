package broker

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the embedded broker's Prometheus counters, read from
// stats at scrape time.
func Collectors(stats func() Stats) []prometheus.Collector {
	var cs []prometheus.Collector
	for _, c := range []struct {
		name, help string
		fn         func(Stats) uint64
	}{
		{"didoedge_broker_connections_refused_total", "Embedded broker: connections closed at the connection limit.", func(s Stats) uint64 { return s.Refused }},
		{"didoedge_broker_idle_closed_total", "Embedded broker: connections closed for sending no CONNECT in time.", func(s Stats) uint64 { return s.IdleClosed }},
		{"didoedge_broker_auth_failures_total", "Embedded broker: CONNECTs refused (credentials, forbidden will).", func(s Stats) uint64 { return s.AuthFailed }},
		{"didoedge_broker_acl_denied_total", "Embedded broker: publishes and subscriptions the ACL refused.", func(s Stats) uint64 { return s.Denied }},
		{"didoedge_broker_rate_limited_total", "Embedded broker: publishes dropped over the message rate.", func(s Stats) uint64 { return s.RateLimited }},
		// The store's bound: drops of droppable messages, and never-dropped
		// events not queued for a client.
		{"didoedge_broker_store_dropped_updates_total", "Embedded broker: queued updates and states dropped (oldest first) to make room in a full store.", func(s Stats) uint64 { return s.Store.DroppedUpdates }},
		{"didoedge_broker_store_refused_total", "Embedded broker: new/end/fault events not queued for a client because the store was full of such events.", func(s Stats) uint64 { return s.Store.Refused }},
		{"didoedge_broker_store_damaged_total", "Embedded broker: stores found damaged or empty at start, moved aside and replaced by a fresh one (the ERROR log line says what was lost).", func(s Stats) uint64 { return s.Store.Damaged }},
		{"didoedge_broker_store_write_errors_total", "Embedded broker: store writes that failed (events stay in the outbox).", func(s Stats) uint64 { return s.Store.WriteErrors }},
	} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(c.fn(stats())) }))
	}
	return cs
}
