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
// streaming runtime calls Frame per frame and Tick periodically.
type Service struct {
	engine *alerts.Engine
	pub    *Publisher
	box    *outbox.Outbox
	broker *broker.Broker
	log    *slog.Logger

	events        []alerts.Event
	statsInterval time.Duration
	lastStats     time.Time
	closeTimeout  time.Duration
}

// Start builds everything a config describes: the embedded broker when
// mqtt.broker is "embedded", the outbox, the publisher and the engine.
func Start(ctx context.Context, cfg alerts.Config, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cal, err := cfg.LoadCalibrationFor()
	if err != nil {
		return nil, err
	}
	zones, ignore, err := cfg.ZoneSet.Resolve("")
	if err != nil {
		return nil, fmt.Errorf("alerts config: %w", err)
	}
	engine, err := alerts.NewEngine(cfg.EngineConfig(), zones, ignore, cal)
	if err != nil {
		return nil, err
	}
	opts, err := PublisherOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	s := &Service{engine: engine, log: log, statsInterval: cfg.MQTT.StatsInterval, closeTimeout: cfg.MQTT.CloseTimeout}
	if cfg.MQTT.Broker == alerts.EmbeddedBroker {
		bo, err := BrokerOptions(cfg.Embedded, log)
		if err != nil {
			return nil, err
		}
		if s.broker, err = broker.Start(ctx, bo); err != nil {
			return nil, err
		}
		opts.Broker = "tcp://" + s.broker.Addr()
	}
	s.box, err = outbox.Open(outbox.Options{Dir: cfg.Outbox.Dir, MaxBytes: cfg.Outbox.MaxBytes,
		MaxRecords: cfg.Outbox.MaxRecords, SegmentBytes: cfg.Outbox.SegmentBytes, Logger: log})
	if err != nil {
		s.closeBroker()
		return nil, err
	}
	if s.pub, err = Open(opts, s.box); err != nil {
		s.box.Close()
		s.closeBroker()
		return nil, err
	}
	now := time.Now()
	s.lastStats = now
	for _, st := range engine.States(now) {
		if err := s.pub.SetState(&st); err != nil {
			log.Warn("initial state", "err", err)
		}
	}
	return s, nil
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

// BrokerOptions derives embedded broker options, reading user passwords.
func BrokerOptions(e alerts.EmbeddedConfig, log *slog.Logger) (broker.Options, error) {
	bo := broker.Options{Listen: e.Listen, AllowAnonymous: e.AllowAnonymous, Logger: log}
	for i, u := range e.Users {
		pass, err := alerts.ReadSecret(fmt.Sprintf("embedded.users[%d].password", i), u.PasswordFile, u.PasswordEnv)
		if err != nil {
			return broker.Options{}, err
		}
		bo.Users = append(bo.Users, broker.User{Username: u.Username, Password: pass})
	}
	return bo, nil
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
	if now.Sub(s.lastStats) >= s.statsInterval {
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
			s.log.Error("alert event not queued", "id", ev.ID, "type", ev.Type, "err", err)
			errs = append(errs, err)
		}
		if ev.Kind == alerts.KindZone {
			if st, ok := s.engine.StateOf(ev); ok {
				if err := s.pub.SetState(&st); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Publisher returns the service's publisher.
func (s *Service) Publisher() *Publisher { return s.pub }

// Close flushes the publisher within mqtt.close_timeout, then closes the
// outbox and the embedded broker.
func (s *Service) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.closeTimeout)
	defer cancel()
	err := s.pub.Close(ctx)
	err = errors.Join(err, s.box.Close())
	if s.broker != nil {
		err = errors.Join(err, s.broker.Close())
	}
	return err
}
