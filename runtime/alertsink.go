package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/alerts/snapshot"
)

// alertSink wires the alert domain into the pipeline: the camera's engine,
// which owns its episodes, and the sinks it delivers to, in order: the
// snapshot renderer and store (when alerts.snapshots.dir is set), the MQTT
// service (outbox, retained states and snapshots, Home Assistant
// discovery), and the pipeline's own hook (counts, printing, the debug
// page's event list), which thus sees every event with its seq. A
// multi-camera runtime keeps one engine per camera over the same sinks.
// The engine is used from the pipeline goroutine only; the snapshot store
// is safe for concurrent use (the debug page reads it).
type alertSink struct {
	cfg    alerts.Config // as started
	log    *slog.Logger
	engine *alerts.Engine
	svc    *mqttpub.Service
	snaps  *snapshot.Store // nil without snapshots
	render *snapshot.Sink  // nil without snapshots
}

// openAlerts starts the MQTT service (embedded broker when configured,
// outbox, publisher), the snapshot store and the engine; onEvent sees
// every event after it was queued; extra sinks (the recorder) come last.
func openAlerts(ctx context.Context, cfg alerts.Config, log *slog.Logger, onEvent func(*alerts.Event), extra ...alerts.Sink) (*alertSink, error) {
	spec, err := cfg.EngineSpec("alerts")
	if err != nil {
		return nil, err
	}
	s := &alertSink{cfg: cfg, log: log}
	if s.svc, err = mqttpub.Start(ctx, cfg, log); err != nil {
		return nil, err
	}
	var sinks alerts.Sinks
	if sn := cfg.Snapshots; sn.Dir != "" {
		if s.snaps, err = snapshot.OpenStore(sn.Dir, sn.MaxBytes); err != nil {
			s.svc.Close(ctx)
			return nil, fmt.Errorf("alerts.snapshots.dir: %w", err)
		}
		// Rendered JPEGs go to the MQTT service (retained).
		if s.render, err = snapshot.NewSink(s.snaps, sn.Quality, log, s.svc); err != nil {
			s.svc.Close(ctx)
			return nil, fmt.Errorf("alerts.snapshots: %w", err)
		}
		sinks = append(sinks, s.render)
	}
	sinks = append(sinks, s.svc, alerts.SinkFuncs{OnEvent: func(ev *alerts.Event) error {
		if onEvent != nil {
			onEvent(ev)
		}
		return nil
	}})
	sinks = append(sinks, extra...)
	if s.engine, err = alerts.NewEngine(spec, sinks); err != nil {
		s.closeRender()
		s.svc.Close(ctx)
		return nil, err
	}
	return s, nil
}

func (s *alertSink) closeRender() {
	if s.render != nil {
		s.render.Close()
	}
}

// zones are the zones assessed now.
func (s *alertSink) zones() []alerts.Zone { return s.engine.Zones() }

// calibration is the calibration in use.
func (s *alertSink) calibration() alerts.Calibration { return s.engine.Calibration() }

// brokerAddr is the embedded broker's address, "" without one.
func (s *alertSink) brokerAddr() string { return s.svc.BrokerAddr() }

// frame assesses one frame and delivers its events.
func (s *alertSink) frame(f alerts.Frame, m alerts.Maps) error { return s.engine.Observe(f, m) }

// tick runs stall detection, and stats and states when due.
func (s *alertSink) tick(now time.Time) error { return s.engine.Tick(now) }

// reload swaps in the zones, calibration and event settings of cfg (see
// alerts.Engine.Reload: open episodes are ended).
func (s *alertSink) reload(cfg alerts.Config, now time.Time) error {
	spec, err := cfg.EngineSpec("alerts")
	if err != nil {
		return err
	}
	o := s.cfg
	if cfg.Vehicle != o.Vehicle || cfg.Camera != o.Camera || cfg.TopicPrefix != o.TopicPrefix || cfg.MQTT != o.MQTT ||
		cfg.Outbox != o.Outbox || cfg.Snapshots != o.Snapshots || cfg.HomeAssistant != o.HomeAssistant {
		s.log.Warn("reload: only zones, calibration and events are reloaded; vehicle, camera, topic_prefix, mqtt, outbox, snapshots and homeassistant changes need a restart")
	}
	return s.engine.Reload(spec, now)
}

// snapshot returns the stored snapshot of an event id.
func (s *alertSink) snapshot(id string) ([]byte, error) {
	if s.snaps == nil {
		return nil, fmt.Errorf("%w: snapshots are off (alerts.snapshots.dir)", snapshot.ErrNotFound)
	}
	return s.snaps.Get(id)
}

// pending is the number of events awaiting the broker's acknowledgement.
func (s *alertSink) pending() int { return s.svc.Publisher().Pending() }

// connected reports whether the MQTT publisher is connected.
func (s *alertSink) connected() bool { return s.svc.Publisher().Connected() }

// close ends the open episodes, renders the snapshots still queued, then
// flushes the outbox within mqtt.close_timeout and closes the outbox and
// the embedded broker.
func (s *alertSink) close(ctx context.Context) error {
	err := s.engine.Close(time.Now())
	s.closeRender()
	return errors.Join(err, s.svc.Close(ctx))
}
