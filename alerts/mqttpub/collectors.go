package mqttpub

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/internal/promfunc"
)

// Collectors are the service's Prometheus metrics, read at scrape time:
// the publisher's queue and connection, its outbox's (outbox.Collectors)
// and, with the embedded broker, the broker's (broker.Collectors).
func (s *Service) Collectors() []prometheus.Collector {
	pub := s.pub
	cs := []prometheus.Collector{
		promfunc.Gauge("didoedge_outbox_pending", "Alert events awaiting the broker's acknowledgement.", pub.Pending),
		promfunc.Flag("didoedge_mqtt_connected", "1 while the MQTT publisher is connected.", pub.Connected),
		promfunc.Counter("didoedge_events_not_queued_total", "Alert events that could not be queued (outbox full or not writable); they are not delivered.", pub.NotQueued),
	}
	cs = append(cs, outbox.Collectors(pub.OutboxStats)...)
	if _, ok := s.BrokerStats(); ok {
		cs = append(cs, broker.Collectors(func() broker.Stats { st, _ := s.BrokerStats(); return st })...)
	}
	return cs
}
