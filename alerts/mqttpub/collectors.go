package mqttpub

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/outbox"
)

// Collectors are the service's Prometheus metrics, read at scrape time:
// the publisher's queue and connection, its outbox's (outbox.Collectors)
// and, with the embedded broker, the broker's (broker.Collectors).
func (s *Service) Collectors() []prometheus.Collector {
	pub := s.pub
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "didoedge_outbox_pending", Help: "Alert events awaiting the broker's acknowledgement."},
			func() float64 { return float64(pub.Pending()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "didoedge_mqtt_connected", Help: "1 while the MQTT publisher is connected."},
			func() float64 {
				if pub.Connected() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "didoedge_events_not_queued_total", Help: "Alert events that could not be queued (outbox full or not writable); they are not delivered."},
			func() float64 { return float64(pub.NotQueued()) }),
	}
	cs = append(cs, outbox.Collectors(pub.OutboxStats)...)
	if _, ok := s.BrokerStats(); ok {
		cs = append(cs, broker.Collectors(func() broker.Stats { st, _ := s.BrokerStats(); return st })...)
	}
	return cs
}
