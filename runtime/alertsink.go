package runtime

import (
	"context"
	"log/slog"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/mqttpub"
)

// alertSink is the pipeline's view of an mqttpub.Service: it follows each
// zone's level for the debug page from the events (without asking the
// engine, whose States allocates) and keeps the current zones and
// calibration in reach after a reload. It is used from the pipeline
// goroutine only.
type alertSink struct {
	svc     *mqttpub.Service
	pub     *mqttpub.Publisher
	zones   []alerts.Zone
	cal     alerts.Calibration
	track   []zoneTrack
	onEvent func(*alerts.Event)
}

// zoneTrack is a zone's level as its events tell it.
type zoneTrack struct {
	level alerts.Level
}

// openAlerts starts the alert service (embedded broker when configured,
// outbox, publisher, engine); onEvent sees every event.
func openAlerts(ctx context.Context, cfg alerts.Config, log *slog.Logger, onEvent func(*alerts.Event)) (*alertSink, error) {
	s := &alertSink{onEvent: onEvent}
	svc, err := mqttpub.Start(ctx, cfg, log, mqttpub.WithConfigKey("alerts"), mqttpub.WithEventHook(s.observe))
	if err != nil {
		return nil, err
	}
	s.svc, s.pub = svc, svc.Publisher()
	s.engineChanged()
	return s, nil
}

func (s *alertSink) engineChanged() {
	s.zones, s.cal = s.svc.Zones(), s.svc.Calibration()
	s.track = make([]zoneTrack, len(s.zones))
}

// observe is the service's event hook.
func (s *alertSink) observe(ev *alerts.Event) {
	if ev.Kind == alerts.KindZone {
		if i, ok := s.svc.ZoneIndex(ev.Zone); ok && i < len(s.track) {
			s.track[i].level = ev.Level
		}
	}
	if s.onEvent != nil {
		s.onEvent(ev)
	}
}

// brokerAddr is the embedded broker's address, "" without one.
func (s *alertSink) brokerAddr() string { return s.svc.BrokerAddr() }

// frame assesses one frame and queues its events.
func (s *alertSink) frame(f alerts.Frame, m alerts.Maps) error { return s.svc.Frame(f, m) }

// tick runs stall detection and publishes stats when due.
func (s *alertSink) tick(now time.Time) error { return s.svc.Tick(now) }

// reload swaps in the zones, calibration and event settings of cfg (see
// mqttpub.Service.Reload: open episodes are ended).
func (s *alertSink) reload(cfg alerts.Config, now time.Time) error {
	if err := s.svc.Reload(cfg, now); err != nil {
		return err
	}
	s.engineChanged()
	return nil
}

// pending is the number of events awaiting the broker's acknowledgement.
func (s *alertSink) pending() int { return s.pub.Pending() }

// close flushes the outbox within mqtt.close_timeout, then closes the
// outbox and the embedded broker.
func (s *alertSink) close(ctx context.Context) error { return s.svc.Close(ctx) }
