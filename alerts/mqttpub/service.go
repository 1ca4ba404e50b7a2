package mqttpub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/internal/redact"
	"github.com/didoedge/didoedge/internal/secret"
)

// Service is the MQTT side of the alert domain for one vehicle process:
// the embedded broker when mqtt.broker is "embedded", the durable outbox
// and the publisher. It is an alerts.Sink: events go into the outbox (their
// Seq set before Event returns), zone states are retained. It also
// implements alerts.StatsSink, alerts.SnapshotSink (the snapshot JPEG,
// retained on <prefix>/<vehicle>/<camera>/<zone>/snapshot) and
// alerts.ZoneSetSink (Home Assistant discovery, when enabled). Engines
// decide; the Service only delivers. One Service serves every camera of a
// vehicle (one engine per camera): its methods are safe for concurrent use.
type Service struct {
	log    *slog.Logger
	cfg    ServiceConfig // as started
	topics alerts.Topics
	pub    *Publisher
	box    *outbox.Outbox
	broker *broker.Broker
	ha     *discovery // nil when Home Assistant discovery is off
}

// Start builds the transport a config describes, publishing under topics:
// the embedded broker when mqtt.broker is "embedded", the outbox and the
// publisher. Zones, calibration and events belong to the engine
// (alerts.NewEngine with the Service as its sink).
func Start(ctx context.Context, topics alerts.Topics, cfg ServiceConfig, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{log: log, cfg: cfg, topics: topics}
	po, err := PublisherOptions(cfg.MQTT, topics, log)
	if err != nil {
		return nil, err
	}
	if cfg.MQTT.Broker == EmbeddedBroker {
		if s.broker, po, err = startEmbedded(ctx, cfg, topics.Prefix, po, log); err != nil {
			return nil, err
		}
	}
	bo := cfg.Outbox.Options()
	bo.Logger = log
	s.box, err = outbox.Open(bo)
	if err != nil {
		s.closeBroker()
		return nil, fmt.Errorf("outbox.dir: %w", err)
	}
	if s.pub, err = Open(po, s.box); err != nil {
		s.box.Close()
		s.closeBroker()
		return nil, err
	}
	if h := cfg.HomeAssistant; h.Discovery {
		s.ha = newDiscovery(h, s.topics)
		s.pub.Subscribe(h.StatusTopic, func(payload []byte) {
			if string(payload) == Online {
				log.Info("home assistant is online: republishing discovery", "topic", h.StatusTopic)
				s.pub.RepublishRetained()
			}
		})
	}
	return s, nil
}

// Event queues an event durably (alerts.Sink); its Seq is set on return.
// An event that could not be queued (outbox full, disk full) keeps Seq 0:
// it will not be delivered, and no seq belongs to it. Emit logs the
// failure (rate-limited).
func (s *Service) Event(ev *alerts.Event) error {
	_, err := s.pub.Emit(ev)
	return err
}

// EventBatch queues events all or nothing (alerts.BatchSink): a reload
// queues the end events of every camera through it before any engine
// changes.
func (s *Service) EventBatch(evs []*alerts.Event) error { return s.pub.EmitBatch(evs) }

// State retains a zone's state (alerts.Sink).
func (s *Service) State(st *alerts.State) error { return s.pub.SetState(st) }

// Stats publishes the engine's statistics with the outbox figures (alerts.StatsSink).
func (s *Service) Stats(st *alerts.Stats) error { return s.pub.PublishStats(st) }

// Snapshot handles an event snapshot (alerts.SnapshotSink). Called by the
// engine before the event goes out, without a JPEG yet, it names the
// zone's snapshot topic in the event when a renderer took the snapshot
// (the event names its path). Called by the renderer with the JPEG
// (snapshot.Sink's next), it retains it on that topic.
func (s *Service) Snapshot(sn *alerts.Snapshot) error {
	topic := s.topics.Snapshot(sn.Event.Camera, sn.Zone.Name)
	if len(sn.JPEG) == 0 {
		if ref := sn.Event.Snapshot; ref != nil && ref.Path != "" {
			ref.Topic = topic
		}
		return nil
	}
	s.pub.SetRetained(topic, sn.JPEG)
	return nil
}

// Zones publishes the Home Assistant discovery configs of a camera's
// zones and clears those of zones it no longer has (alerts.ZoneSetSink).
// Without discovery it does nothing.
func (s *Service) Zones(vehicle, camera string, zones []string) error {
	if s.ha == nil {
		return nil
	}
	set, clear, err := s.ha.announce(vehicle, camera, zones)
	if err != nil {
		return err
	}
	for _, topic := range clear {
		s.pub.SetRetained(topic, nil) // an empty retained config removes the entity
	}
	for _, c := range set {
		s.pub.SetRetained(c.Topic, c.Payload)
	}
	return nil
}

// CameraRemoved forgets a camera removed at run time
// (alerts.CameraRemovedSink): every retained payload under its topics
// (zone states, snapshots) is cleared with an empty retained payload, and
// with Home Assistant discovery its entities' configs too (an empty
// retained config removes the entity).
func (s *Service) CameraRemoved(_, camera string, zones []string) error {
	// The service's topics (the engine's vehicle is the same).
	cleared := s.pub.ClearRetained(s.topics.Prefix + "/" + s.topics.Vehicle + "/" + camera + "/")
	var ha []string
	if s.ha != nil {
		ha = s.ha.forget(camera)
		for _, topic := range ha {
			s.pub.SetRetained(topic, nil)
		}
	}
	s.log.Info("camera removed: retained topics cleared", "camera", camera, "zones", len(zones),
		"retained_cleared", len(cleared), "discovery_cleared", len(ha))
	return nil
}

// ControlMessage is a message on a control set topic: its topic, payload
// and who published it (an embedded broker user, or "external broker").
type ControlMessage struct {
	Topic   string
	Payload []byte
	From    string
}

// SubscribeControl subscribes fn to a filter of control set topics
// (mqtt.set_topics). With the embedded broker only clients whose ACL
// grants write on the topic can have published a message (embedded.users
// write: a filter ending in "set"); with an external broker the runtime's
// connection is authenticated (Config.Validate), and the broker's ACL
// decides who may publish. Retained messages are dropped and logged: a
// change is applied when it is sent, never replayed when the runtime
// subscribes again. fn must not block.
func (s *Service) SubscribeControl(filter string, fn func(ControlMessage)) error {
	if !s.cfg.MQTT.SetTopics {
		return errors.New("mqtt.set_topics is off")
	}
	drop := func(topic, from string) {
		s.log.Warn("mqtt control: retained set message ignored (publish set messages without retain)", "topic", topic, "from", from)
	}
	if s.broker != nil {
		return s.broker.SubscribeMessages(filter, func(m broker.Message) {
			from := fmt.Sprintf("mqtt user %q (client %q)", m.Username, m.ClientID)
			switch {
			case m.InProcess:
				from = "mqtt in-process client"
			case m.Username == "":
				from = fmt.Sprintf("mqtt anonymous client %q", m.ClientID)
			}
			if m.Retained {
				drop(m.Topic, from)
				return
			}
			fn(ControlMessage{Topic: m.Topic, Payload: m.Payload, From: from})
		})
	}
	s.pub.SubscribeMessages(filter, func(topic string, payload []byte, retained bool) {
		if retained {
			drop(topic, "external broker")
			return
		}
		fn(ControlMessage{Topic: topic, Payload: payload, From: "external broker " + redact.URL(s.cfg.MQTT.Broker)})
	})
	return nil
}

// PublishResult publishes a control result (QoS 1, not retained; lost
// while disconnected).
func (s *Service) PublishResult(topic string, payload []byte) { s.pub.PublishMessage(topic, payload) }

// Topics returns the topic builder the service publishes under.
func (s *Service) Topics() alerts.Topics { return s.topics }

func (s *Service) closeBroker() {
	if s.broker != nil {
		s.broker.Close()
	}
}

// PublisherOptions derives publisher options from the connection settings:
// credentials from a file or the environment, TLS files.
func PublisherOptions(m Config, topics alerts.Topics, log *slog.Logger) (Options, error) {
	pass, err := secret.Read("mqtt.password_file", m.PasswordFile, m.PasswordEnv)
	if err != nil {
		return Options{}, err
	}
	o := Options{Broker: m.Broker, ClientID: m.ClientID, Username: m.Username, Password: pass,
		Topics: topics, StatsQoS: byte(m.StatsQoS), KeepAlive: m.KeepAlive, InFlight: m.InFlight, Logger: log}
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
		pem, err := boundedfile.Read("ca", caFile, boundedfile.PEM)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca %q: no PEM certificate", caFile)
		}
		c.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := loadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// loadKeyPair is tls.LoadX509KeyPair with both files read bounded
// (regular files, at most boundedfile.PEM's cap).
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := boundedfile.Read("cert", certFile, boundedfile.PEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := boundedfile.Read("key", keyFile, boundedfile.PEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cert %q, key %q: %w", certFile, keyFile, err)
	}
	return cert, nil
}

// Config returns the config the service was started with.
func (s *Service) Config() ServiceConfig { return s.cfg }

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

// SinkName names the sink in errors and logs (alerts.SinkError): the MQTT outbox.
func (s *Service) SinkName() string { return "mqtt outbox" }
