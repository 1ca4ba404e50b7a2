package stream

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/alerts/snapshot"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// alertSink wires the alert domain into the pipeline: one engine per
// camera, each owning its episodes, and the sinks they share, in order:
// the snapshot renderer and store (when alerts.snapshots.dir is set), the
// MQTT service (one client id, one availability topic, one outbox with one
// seq space for the process), and the camera's own hook (counts,
// printing, the debug page's event list), which thus sees every event with
// its seq. The engines are used from the pipeline goroutine only; the
// snapshot store is safe for concurrent use (the debug page reads it).
type alertSink struct {
	cfg    runconfig.AlertsConfig // the shared settings as started
	log    *slog.Logger
	svc    *mqttpub.Service
	snaps  *snapshot.Store // nil without snapshots
	render *snapshot.Sink  // nil without snapshots
	sinks  alerts.Sinks    // renderer and MQTT service
}

// openAlerts starts the MQTT service (embedded broker when configured,
// outbox, publisher) and the snapshot store; newEngine adds the cameras.
// Extra sinks (the recorder) see every event after the MQTT service, so
// with its outbox seq.
func openAlerts(ctx context.Context, cfg runconfig.AlertsConfig, log *slog.Logger, extra ...alerts.Sink) (*alertSink, error) {
	s := &alertSink{cfg: cfg, log: log}
	var err error
	if s.svc, err = mqttpub.Start(ctx, cfg.Topics(), cfg.ServiceConfig, log); err != nil {
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
	s.sinks = append(append(sinks, s.svc), extra...)
	return s, nil
}

// newEngine builds a camera's engine over the shared sinks; onEvent sees
// every event of the camera after it was queued.
func (s *alertSink) newEngine(spec alerts.EngineSpec, onEvent func(*alerts.Event)) (*alerts.Engine, error) {
	sinks := append(slices.Clone(s.sinks), alerts.SinkFuncs{OnEvent: func(ev *alerts.Event) error {
		onEvent(ev)
		return nil
	}})
	return alerts.NewEngine(spec, sinks)
}

func (s *alertSink) closeRender() {
	if s.render != nil {
		s.render.Close()
	}
}

// brokerAddr is the embedded broker's address, "" without one.
func (s *alertSink) brokerAddr() string { return s.svc.BrokerAddr() }

// restartOnly reports whether cfg changes settings that a reload does not
// apply (they need a restart).
func (s *alertSink) restartOnly(cfg runconfig.AlertsConfig) bool {
	o := s.cfg
	return cfg.Vehicle != o.Vehicle || cfg.TopicPrefix != o.TopicPrefix || cfg.MQTT != o.MQTT ||
		cfg.Outbox != o.Outbox || cfg.Snapshots != o.Snapshots || cfg.HomeAssistant != o.HomeAssistant
}

// snapshot returns the stored snapshot of an event id.
func (s *alertSink) snapshot(id string) ([]byte, error) {
	if s.snaps == nil {
		return nil, fmt.Errorf("%w: snapshots are off (alerts.snapshots.dir)", snapshot.ErrNotFound)
	}
	return s.snaps.Get(id)
}

// connected reports whether the MQTT publisher is connected.
func (s *alertSink) connected() bool { return s.svc.Publisher().Connected() }

// close renders the snapshots still queued, then flushes the outbox
// within mqtt.close_timeout and closes the outbox and the embedded broker.
// The engines are closed (their open episodes ended) before.
func (s *alertSink) close(ctx context.Context) error {
	s.closeRender()
	return s.svc.Close(ctx)
}
