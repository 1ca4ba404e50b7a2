package mqttpub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/outbox"
)

// Service wires an alerts.Engine to a Publisher for one camera: the
// streaming runtime calls Frame per frame and Tick periodically, from one
// goroutine. Every event is queued in the outbox, the retained state of its
// zone is updated, and then the event hook (WithEventHook) sees it. Reload
// replaces the engine when zones or thresholds change.
type Service struct {
	log    *slog.Logger
	opts   serviceOptions
	cfg    alerts.Config // as started, but zones, calibration and events as last loaded
	engine *alerts.Engine
	zones  []alerts.Zone
	cal    alerts.Calibration
	pub    *Publisher
	box    *outbox.Outbox
	broker *broker.Broker

	events    []alerts.Event
	zoneIndex map[string]int
	open      []episode // per zone, from the events emitted
	fault     episode   // the camera fault
	lastSeq   uint64    // of the last frame
	lastStats time.Time
}

// episode is an open episode as the events emitted describe it; Reload
// ends it, because a new engine knows nothing of it.
type episode struct {
	id      string // "" when none is open
	level   alerts.Level
	startMS int64
}

// Option tunes a Service.
type Option func(*serviceOptions)

type serviceOptions struct {
	onEvent   func(*alerts.Event)
	configKey string
}

// WithEventHook has fn called with every event once it is queued (its Seq
// set) and its zone state updated, including the end events of Reload.
// An event that could not be queued (outbox full, disk full) is passed
// with Seq 0: it will not be delivered, and no seq belongs to it.
// fn runs on the caller's goroutine and must not keep ev.
func WithEventHook(fn func(ev *alerts.Event)) Option {
	return func(o *serviceOptions) { o.onEvent = fn }
}

// WithConfigKey names where the alerts config sits in a larger file
// (e.g. "alerts"), so that zone errors name the full key path.
func WithConfigKey(key string) Option {
	return func(o *serviceOptions) { o.configKey = key }
}

// Start builds everything a config describes: the embedded broker when
// mqtt.broker is "embedded", the outbox, the publisher and the engine. The
// initial state of every zone is published.
func Start(ctx context.Context, cfg alerts.Config, log *slog.Logger, opts ...Option) (*Service, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{log: log, cfg: cfg}
	for _, o := range opts {
		o(&s.opts)
	}
	engine, zones, cal, err := buildEngine(cfg, s.opts.configKey)
	if err != nil {
		return nil, err
	}
	po, err := PublisherOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	if cfg.MQTT.Broker == alerts.EmbeddedBroker {
		if s.broker, po, err = startEmbedded(ctx, cfg, po, log); err != nil {
			return nil, err
		}
	}
	s.box, err = outbox.Open(outbox.Options{Dir: cfg.Outbox.Dir, MaxBytes: cfg.Outbox.MaxBytes,
		MaxRecords: cfg.Outbox.MaxRecords, SegmentBytes: cfg.Outbox.SegmentBytes, Logger: log})
	if err != nil {
		s.closeBroker()
		return nil, fmt.Errorf("outbox.dir: %w", err)
	}
	if s.pub, err = Open(po, s.box); err != nil {
		s.box.Close()
		s.closeBroker()
		return nil, err
	}
	s.setEngine(engine, zones, cal)
	s.lastStats = time.Now()
	s.publishStates(s.lastStats, "initial zone state")
	return s, nil
}

// buildEngine builds the engine of cfg; key prefixes zone errors.
func buildEngine(cfg alerts.Config, key string) (*alerts.Engine, []alerts.Zone, alerts.Calibration, error) {
	cal, err := cfg.LoadCalibrationFor()
	if err != nil {
		return nil, nil, cal, err
	}
	zones, ignore, err := cfg.ZoneSet.Resolve(key)
	if err != nil {
		if key == "" {
			err = fmt.Errorf("alerts config: %w", err)
		}
		return nil, nil, cal, err
	}
	e, err := alerts.NewEngine(cfg.EngineConfig(), zones, ignore, cal)
	if err != nil {
		return nil, nil, cal, err
	}
	return e, zones, cal, nil
}

func (s *Service) setEngine(e *alerts.Engine, zones []alerts.Zone, cal alerts.Calibration) {
	s.engine, s.zones, s.cal = e, zones, cal
	s.open = make([]episode, len(zones))
	s.fault = episode{}
	s.zoneIndex = make(map[string]int, len(zones))
	for i, z := range zones {
		s.zoneIndex[z.Name] = i
	}
}

func (s *Service) publishStates(now time.Time, what string) {
	for _, st := range s.engine.States(now) {
		if err := s.pub.SetState(&st); err != nil {
			s.log.Warn(what, "zone", st.Zone, "err", err)
		}
	}
}

func (s *Service) closeBroker() {
	if s.broker != nil {
		s.broker.Close()
	}
}

// PublisherOptions derives publisher options from a config: credentials
// from a file or the environment, TLS files.
func PublisherOptions(cfg alerts.Config, log *slog.Logger) (Options, error) {
	m := cfg.MQTT
	pass, err := alerts.ReadSecret("mqtt.password_file", m.PasswordFile, m.PasswordEnv)
	if err != nil {
		return Options{}, err
	}
	o := Options{Broker: m.Broker, ClientID: m.ClientID, Username: m.Username, Password: pass,
		Topics: cfg.Topics(), StatsQoS: byte(m.StatsQoS), KeepAlive: m.KeepAlive, InFlight: m.InFlight, Logger: log}
	if m.TLS != nil {
		if o.TLS, err = TLSConfig(m.TLS.CA, m.TLS.Cert, m.TLS.Key, m.TLS.ServerName); err != nil {
			return Options{}, fmt.Errorf("mqtt.tls: %w", err)
		}
	}
	return o, nil
}

// TLSConfig loads a CA bundle (empty: system roots) and an optional client
// certificate and key, all PEM.
func TLSConfig(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca %q: no PEM certificate", caFile)
		}
		c.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("cert %q, key %q: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Frame assesses one frame and queues the events it raises. An error
// from the outbox (full) is returned after the other events were queued.
func (s *Service) Frame(f alerts.Frame, m alerts.Maps) error {
	var err error
	s.lastSeq = f.Seq
	s.events, err = s.engine.Observe(f, m, s.events[:0])
	if err != nil {
		return err
	}
	return s.emit()
}

// Tick detects a stalled camera and publishes stats when due.
func (s *Service) Tick(now time.Time) error {
	s.events = s.engine.Tick(now, s.events[:0])
	err := s.emit()
	if now.Sub(s.lastStats) >= s.cfg.MQTT.StatsInterval {
		st := s.engine.Stats(now)
		s.lastStats = now
		err = errors.Join(err, s.pub.PublishStats(&st))
	}
	return err
}

func (s *Service) emit() error {
	var errs []error
	for i := range s.events {
		ev := &s.events[i]
		if _, err := s.pub.Emit(ev); err != nil {
			// Emit logged it (rate-limited) and set ev.Seq to 0.
			errs = append(errs, err)
		}
		switch ev.Kind {
		case alerts.KindZone:
			if i, ok := s.zoneIndex[ev.Zone]; ok {
				s.open[i].follow(ev)
			}
			if st, ok := s.engine.StateOf(ev); ok {
				if err := s.pub.SetState(&st); err != nil {
					errs = append(errs, err)
				}
			}
		case alerts.KindCameraFault:
			s.fault.follow(ev)
		}
		if s.opts.onEvent != nil {
			s.opts.onEvent(ev)
		}
	}
	return errors.Join(errs...)
}

func (e *episode) follow(ev *alerts.Event) {
	if ev.Type == alerts.EventEnd {
		*e = episode{}
		return
	}
	*e = episode{id: ev.ID, level: ev.Level, startMS: ev.StartMS}
}

// Reload replaces the engine with one built from the zones, calibration
// and events settings of cfg; identity, MQTT, outbox and embedded broker
// settings are kept (changing them needs a restart, which is logged). A
// config that does not build an engine is refused and the running engine
// kept. Otherwise the open episodes of the old engine, zone risks and a
// camera fault alike, are ended with an end event each (no reasons for
// zones, as the engine's own end events), because the new engine starts
// every zone at ok and the camera as delivering; an ended zone's retained
// state turns ok, and then the new engine's states are published.
// Failures to queue an end event are logged: the new engine is in place.
func (s *Service) Reload(cfg alerts.Config, now time.Time) error {
	c := s.cfg
	c.ZoneSet, c.Calibration, c.Events = cfg.ZoneSet, cfg.Calibration, cfg.Events
	engine, zones, cal, err := buildEngine(c, s.opts.configKey)
	if err != nil {
		return err
	}
	if cfg.Vehicle != s.cfg.Vehicle || cfg.Camera != s.cfg.Camera || cfg.TopicPrefix != s.cfg.TopicPrefix ||
		cfg.MQTT != s.cfg.MQTT || cfg.Outbox != s.cfg.Outbox {
		s.log.Warn("reload: only zones, calibration and events are reloaded; vehicle, camera, topic_prefix, mqtt and outbox changes need a restart")
	}
	tms := now.UnixMilli()
	s.events = s.events[:0]
	for i, ep := range s.open {
		if ep.id == "" {
			continue
		}
		s.events = append(s.events, alerts.Event{Schema: alerts.EventSchemaID, ID: ep.id,
			Type: alerts.EventEnd, Kind: alerts.KindZone, Vehicle: c.Vehicle, Camera: c.Camera,
			Zone: s.zones[i].Name, Level: alerts.LevelOK, Previous: ep.level, Reasons: []string{},
			StartMS: ep.startMS, TimeMS: tms, FrameSeq: s.lastSeq})
	}
	if ep := s.fault; ep.id != "" {
		s.events = append(s.events, alerts.Event{Schema: alerts.EventSchemaID, ID: ep.id,
			Type: alerts.EventEnd, Kind: alerts.KindCameraFault, Vehicle: c.Vehicle, Camera: c.Camera,
			Fault: alerts.FaultCameraStalled, Level: alerts.LevelOK, Previous: ep.level,
			Reasons: []string{alerts.FaultCameraStalled}, StartMS: ep.startMS, TimeMS: tms, FrameSeq: s.lastSeq})
	}
	for i := range s.events {
		ev := &s.events[i]
		if _, err := s.pub.Emit(ev); err != nil {
			s.log.Error("reload: end event not queued", "id", ev.ID, "err", err)
		}
		if ev.Kind == alerts.KindZone {
			st := alerts.State{Schema: alerts.StateSchemaID, Vehicle: c.Vehicle, Camera: c.Camera,
				Zone: ev.Zone, Level: alerts.LevelOK, SinceMS: tms, TimeMS: tms}
			if err := s.pub.SetState(&st); err != nil {
				s.log.Warn("reload: zone state", "zone", ev.Zone, "err", err)
			}
		}
		if s.opts.onEvent != nil {
			s.opts.onEvent(ev)
		}
	}
	s.cfg = c
	s.setEngine(engine, zones, cal)
	s.publishStates(now, "zone state after reload")
	return nil
}

// Zones returns the zones of the current engine, in its order; the
// caller must not modify them.
func (s *Service) Zones() []alerts.Zone { return s.zones }

// ZoneIndex returns the position of the named zone in Zones.
func (s *Service) ZoneIndex(name string) (int, bool) {
	i, ok := s.zoneIndex[name]
	return i, ok
}

// Calibration returns the calibration of the current engine.
func (s *Service) Calibration() alerts.Calibration { return s.cal }

// Config returns the config in effect: as started, with the zones,
// calibration and events settings of the last Reload.
func (s *Service) Config() alerts.Config { return s.cfg }

// Publisher returns the service's publisher.
func (s *Service) Publisher() *Publisher { return s.pub }

// BrokerAddr is the embedded broker's address, "" without one.
func (s *Service) BrokerAddr() string {
	if s.broker == nil {
		return ""
	}
	return s.broker.Addr()
}

// Close flushes the publisher within mqtt.close_timeout, then closes the
// outbox and the embedded broker.
func (s *Service) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.MQTT.CloseTimeout)
	defer cancel()
	err := s.pub.Close(ctx)
	err = errors.Join(err, s.box.Close())
	if s.broker != nil {
		err = errors.Join(err, s.broker.Close())
	}
	return err
}
