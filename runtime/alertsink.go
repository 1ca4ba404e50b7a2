package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/alerts/outbox"
)

// alertSink wires the alert engine to the MQTT publisher like
// mqttpub.Service does, but keeps the engine in reach: the pipeline
// swaps it on SIGHUP and tracks zone levels for the debug page. It is used
// from the pipeline goroutine only.
type alertSink struct {
	log    *slog.Logger
	cfg    alerts.Config
	engine *alerts.Engine
	zones  []alerts.Zone
	cal    alerts.Calibration
	pub    *mqttpub.Publisher
	box    *outbox.Outbox
	broker *broker.Broker

	events    []alerts.Event
	track     []zoneTrack
	zoneIndex map[string]int
	lastStats time.Time
	lastSeq   uint64
	onEvent   func(*alerts.Event)
}

// zoneTrack follows a zone's level from its events, without asking the
// engine (whose States allocates).
type zoneTrack struct {
	level   alerts.Level
	episode string
	startMS int64
}

func buildEngine(cfg alerts.Config) (*alerts.Engine, []alerts.Zone, alerts.Calibration, error) {
	cal, err := cfg.LoadCalibrationFor()
	if err != nil {
		return nil, nil, cal, err
	}
	zones, ignore, err := cfg.ZoneSet.Resolve("alerts")
	if err != nil {
		return nil, nil, cal, err
	}
	e, err := alerts.NewEngine(cfg.EngineConfig(), zones, ignore, cal)
	if err != nil {
		return nil, nil, cal, err
	}
	return e, zones, cal, nil
}

// openAlerts starts the embedded broker when configured, the outbox and the
// publisher.
func openAlerts(ctx context.Context, cfg alerts.Config, log *slog.Logger, onEvent func(*alerts.Event)) (*alertSink, error) {
	engine, zones, cal, err := buildEngine(cfg)
	if err != nil {
		return nil, err
	}
	opts, err := mqttpub.PublisherOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	s := &alertSink{log: log, cfg: cfg, onEvent: onEvent}
	s.setEngine(engine, zones, cal)
	if cfg.MQTT.Broker == alerts.EmbeddedBroker {
		bo, err := mqttpub.BrokerOptions(cfg.Embedded, log)
		if err != nil {
			return nil, err
		}
		if s.broker, err = broker.Start(ctx, bo); err != nil {
			return nil, fmt.Errorf("embedded broker on %s: %w", cfg.Embedded.Listen, err)
		}
		opts.Broker = "tcp://" + s.broker.Addr()
	}
	s.box, err = outbox.Open(outbox.Options{Dir: cfg.Outbox.Dir, MaxBytes: cfg.Outbox.MaxBytes,
		MaxRecords: cfg.Outbox.MaxRecords, SegmentBytes: cfg.Outbox.SegmentBytes, Logger: log})
	if err != nil {
		s.closeBroker()
		return nil, err
	}
	if s.pub, err = mqttpub.Open(opts, s.box); err != nil {
		s.box.Close()
		s.closeBroker()
		return nil, err
	}
	s.lastStats = time.Now()
	for _, st := range engine.States(s.lastStats) {
		if err := s.pub.SetState(&st); err != nil {
			log.Warn("initial zone state", "zone", st.Zone, "err", err)
		}
	}
	return s, nil
}

func (s *alertSink) setEngine(e *alerts.Engine, zones []alerts.Zone, cal alerts.Calibration) {
	s.engine, s.zones, s.cal = e, zones, cal
	s.track = make([]zoneTrack, len(zones))
	s.zoneIndex = make(map[string]int, len(zones))
	for i, z := range zones {
		s.zoneIndex[z.Name] = i
	}
}

// brokerAddr is the embedded broker's address, "" without one.
func (s *alertSink) brokerAddr() string {
	if s.broker == nil {
		return ""
	}
	return s.broker.Addr()
}

func (s *alertSink) closeBroker() {
	if s.broker != nil {
		s.broker.Close()
	}
}

// frame assesses one frame and queues its events.
func (s *alertSink) frame(f alerts.Frame, m alerts.Maps) error {
	var err error
	s.lastSeq = f.Seq
	s.events, err = s.engine.Observe(f, m, s.events[:0])
	if err != nil {
		return err
	}
	return s.emit()
}

// tick runs stall detection and publishes stats when due.
func (s *alertSink) tick(now time.Time) error {
	s.events = s.engine.Tick(now, s.events[:0])
	err := s.emit()
	if now.Sub(s.lastStats) >= s.cfg.MQTT.StatsInterval {
		st := s.engine.Stats(now)
		s.lastStats = now
		err = errors.Join(err, s.pub.PublishStats(&st))
	}
	return err
}

func (s *alertSink) emit() error {
	var errs []error
	for i := range s.events {
		ev := &s.events[i]
		if _, err := s.pub.Emit(ev); err != nil {
			s.log.Error("alert event not queued", "id", ev.ID, "type", ev.Type, "err", err)
			errs = append(errs, err)
		}
		if ev.Kind == alerts.KindZone {
			if i, ok := s.zoneIndex[ev.Zone]; ok {
				t := &s.track[i]
				t.level = ev.Level
				if ev.Type == alerts.EventEnd {
					t.episode, t.startMS = "", 0
				} else {
					t.episode, t.startMS = ev.ID, ev.StartMS
				}
			}
			if st, ok := s.engine.StateOf(ev); ok {
				if err := s.pub.SetState(&st); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if s.onEvent != nil {
			s.onEvent(ev)
		}
	}
	return errors.Join(errs...)
}

// reload swaps in the zones and calibration of cfg. Open episodes of the
// old engine are ended (an end event each, no reasons), because the new
// engine starts every zone at ok and subscribers must not be left with an
// episode that never ends. Identity, MQTT and outbox settings are kept.
func (s *alertSink) reload(cfg alerts.Config, now time.Time) error {
	engine, zones, cal, err := buildEngine(cfg)
	if err != nil {
		return err
	}
	if cfg.Vehicle != s.cfg.Vehicle || cfg.Camera != s.cfg.Camera || cfg.MQTT != s.cfg.MQTT || cfg.Outbox != s.cfg.Outbox {
		s.log.Warn("reload: only zones, calibration and events are reloaded; vehicle, camera, mqtt and outbox changes need a restart")
	}
	s.events = s.events[:0]
	for i, t := range s.track {
		if t.level == alerts.LevelOK || t.episode == "" {
			continue
		}
		s.events = append(s.events, alerts.Event{Schema: alerts.EventSchemaID, ID: t.episode,
			Type: alerts.EventEnd, Kind: alerts.KindZone, Vehicle: s.cfg.Vehicle, Camera: s.cfg.Camera,
			Zone: s.zones[i].Name, Level: alerts.LevelOK, Previous: t.level, Reasons: []string{},
			StartMS: t.startMS, TimeMS: now.UnixMilli(), FrameSeq: s.lastSeq})
	}
	ends := s.events
	for i := range ends {
		if _, err := s.pub.Emit(&ends[i]); err != nil {
			s.log.Error("reload: end event not queued", "id", ends[i].ID, "err", err)
		}
		if s.onEvent != nil {
			s.onEvent(&ends[i])
		}
	}
	keep := s.cfg
	keep.ZoneSet, keep.Calibration, keep.Events = cfg.ZoneSet, cfg.Calibration, cfg.Events
	s.cfg = keep
	s.setEngine(engine, zones, cal)
	for _, st := range engine.States(now) {
		if err := s.pub.SetState(&st); err != nil {
			s.log.Warn("zone state after reload", "zone", st.Zone, "err", err)
		}
	}
	return nil
}

// pending is the number of events awaiting the broker's acknowledgement.
func (s *alertSink) pending() int { return s.pub.Pending() }

// close flushes the outbox within mqtt.close_timeout, then closes the
// outbox and the embedded broker.
func (s *alertSink) close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MQTT.CloseTimeout)
	defer cancel()
	err := s.pub.Close(ctx)
	err = errors.Join(err, s.box.Close())
	if s.broker != nil {
		err = errors.Join(err, s.broker.Close())
	}
	return err
}
