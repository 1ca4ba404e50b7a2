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
	} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(c.fn(stats())) }))
	}
	return cs
}
