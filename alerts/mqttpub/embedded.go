package mqttpub

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/internal/secret"
)

// BrokerOptions derives embedded broker options, reading user passwords
// and the TLS files. prefix is the topic prefix anonymous clients may
// read (when allowed).
func BrokerOptions(e broker.Config, prefix string, log *slog.Logger) (broker.Options, error) {
	bo := broker.Options{Listen: e.Listen, AllowAnonymous: e.AllowAnonymous, ConnectTimeout: e.ConnectTimeout,
		MaxConnections: e.MaxConnections, MessageRate: e.MessageRate, MessageBurst: e.MessageBurst,
		Store: e.Store, Droppable: droppableMessage, Logger: log}
	if e.AllowAnonymous {
		bo.AnonymousRead = []string{prefix + "/#"}
	}
	for i, u := range e.Users {
		pass, err := secret.Read(fmt.Sprintf("embedded.users[%d].password", i), u.PasswordFile, u.PasswordEnv)
		if err != nil {
			return broker.Options{}, err
		}
		bo.Users = append(bo.Users, broker.User{Username: u.Username, Password: pass, Read: u.Read, Write: u.Write})
	}
	if t := e.TLS; t != nil {
		cfg, err := ServerTLSConfig(t.Cert, t.Key, t.ClientCA)
		if err != nil {
			return broker.Options{}, fmt.Errorf("embedded.tls: %w", err)
		}
		bo.TLSListen, bo.TLS = t.Listen, cfg
	}
	return bo, nil
}

// droppableMessage tells the embedded broker's store which queued
// messages may go first when it is full: alert events that are zone
// updates (Event.Droppable: a later update or the episode's end supersedes
// them) and everything that is not an alert event (zone states,
// snapshots, stats, availability, discovery: retained or periodic, a later
// one supersedes them). new, end and camera-fault events never are.
func droppableMessage(topic string, payload []byte) bool {
	if !strings.HasSuffix(topic, "/events") {
		return true
	}
	var ev alerts.Event
	if err := json.Unmarshal(payload, &ev); err != nil {
		return false
	}
	return ev.Droppable()
}

// startEmbedded starts the embedded broker of cfg, persistent in
// embedded.store.dir (default <outbox.dir>/broker), with an account for
// the runtime's own client, the only one allowed to publish under the
// topic prefix (a password made now, never written anywhere), and points
// the publisher options at it: the publisher publishes in process
// (Options.InProcess).
func startEmbedded(ctx context.Context, cfg ServiceConfig, topicPrefix string, po Options, log *slog.Logger) (*broker.Broker, Options, error) {
	emb := cfg.Embedded
	if emb.Store.Dir == "" {
		// Inside the outbox's directory: the one place the runtime
		// writes its durable state (the systemd unit's ReadWritePaths).
		emb.Store.Dir = filepath.Join(cfg.Outbox.Dir, "broker")
	}
	bo, err := BrokerOptions(emb, topicPrefix, log)
	if err != nil {
		return nil, po, err
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, po, fmt.Errorf("embedded broker: %w", err)
	}
	pass := hex.EncodeToString(key[:])
	runtimeUser := broker.User{Username: broker.RuntimeUser, Password: pass,
		Write: []string{topicPrefix + "/#"}, Unlimited: true}
	if ha := cfg.HomeAssistant; ha.Discovery {
		// The runtime publishes the discovery configs and listens for
		// Home Assistant's birth message; readers of the alerts may read
		// the configs too (Home Assistant itself needs a user that may
		// publish its status topic: embedded.users).
		runtimeUser.Write = append(runtimeUser.Write, ha.Prefix+"/#")
		runtimeUser.Read = append(runtimeUser.Read, ha.StatusTopic)
		if bo.AllowAnonymous {
			bo.AnonymousRead = append(bo.AnonymousRead, ha.Prefix+"/#")
		}
	}
	bo.Users = append(bo.Users, runtimeUser)
	b, err := broker.Start(ctx, bo)
	if err != nil {
		return nil, po, fmt.Errorf("embedded.listen %s: embedded broker: %w", cfg.Embedded.Listen, err)
	}
	po.Broker = "tcp://" + b.Addr()
	po.Username, po.Password, po.TLS = broker.RuntimeUser, pass, nil
	po.InProcess = b
	return b, po, nil
}

// ServerTLSConfig loads a server certificate and key and, when clientCA is
// set, requires client certificates signed by it; all PEM, TLS 1.2+.
func ServerTLSConfig(certFile, keyFile, clientCA string) (*tls.Config, error) {
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCA != "" {
		pem, err := boundedfile.Read("client_ca", clientCA, boundedfile.PEM)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client_ca %q: no PEM certificate", clientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// BrokerStats returns the embedded broker's counters; false without one.
func (s *Service) BrokerStats() (broker.Stats, bool) {
	if s.broker == nil {
		return broker.Stats{}, false
	}
	return s.broker.Stats(), true
}
