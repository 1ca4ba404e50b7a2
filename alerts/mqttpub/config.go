package mqttpub

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/internal/redact"
)

// ServiceConfig is everything the MQTT service runs on, one section of the
// deployment's alerts config each: the connection (mqtt), the durable
// outbox, the embedded broker and Home Assistant discovery. The topic
// identity (vehicle, topic prefix) is the alerts domain's (alerts.Topics).
type ServiceConfig struct {
	MQTT          Config              `yaml:"mqtt"`
	Outbox        outbox.Config       `yaml:"outbox"`
	Embedded      broker.Config       `yaml:"embedded"`
	HomeAssistant HomeAssistantConfig `yaml:"homeassistant"`
}

// Config configures the publisher's connection (alerts.mqtt).
type Config struct {
	// Broker is a URL (tcp://host:port, ssl://host:port) or "embedded".
	Broker   string `yaml:"broker"`
	ClientID string `yaml:"client_id"`
	// Username, and the password from a file or an environment variable.
	Username     string    `yaml:"username"`
	PasswordFile string    `yaml:"password_file"`
	PasswordEnv  string    `yaml:"password_env"`
	TLS          *TLSFiles `yaml:"tls"`
	// StatsQoS is the QoS of stats messages (0 or 1); events are always QoS 1.
	StatsQoS      int           `yaml:"stats_qos"`
	StatsInterval time.Duration `yaml:"stats_interval"`
	KeepAlive     time.Duration `yaml:"keepalive"`
	// InFlight is how many events may await PUBACK at once.
	InFlight int `yaml:"in_flight"`
	// CloseTimeout bounds the flush on shutdown.
	CloseTimeout time.Duration `yaml:"close_timeout"`
	// SetTopics subscribes the control set topics
	// (<prefix>/<vehicle>/<camera>/zones/set, <prefix>/<vehicle>/profile/set;
	// docs/alerts.md): with the embedded broker only its users with a
	// write grant on them can publish there, with an external broker
	// only when the runtime's connection is authenticated (username or
	// client certificate), so that the broker authenticates publishers.
	SetTopics bool `yaml:"set_topics"`
}

// TLSFiles names PEM files; paths are relative to the config file.
type TLSFiles struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName overrides the name checked in the broker's certificate.
	ServerName string `yaml:"server_name"`
}

// HomeAssistantConfig turns on Home Assistant MQTT discovery.
type HomeAssistantConfig struct {
	Discovery bool `yaml:"discovery"`
	// Prefix is Home Assistant's discovery prefix.
	Prefix string `yaml:"prefix"`
	// StatusTopic carries Home Assistant's birth message ("online"), on
	// which the discovery configs are published again.
	StatusTopic string `yaml:"status_topic"`
}

// EmbeddedBroker is the value of mqtt.broker that starts the embedded broker.
const EmbeddedBroker = "embedded"

var (
	topicPattern  = regexp.MustCompile(`^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$`)
	brokerPattern = regexp.MustCompile(`^(tcp|ssl|tls|mqtt|mqtts)://[^/]+$`)
)

// ApplyDefaults fills the keys left out: the client id from the vehicle,
// users' read grants from the topic prefix.
func (c *ServiceConfig) ApplyDefaults(vehicle, topicPrefix string) {
	m := &c.MQTT
	if m.Broker == "" {
		m.Broker = "tcp://127.0.0.1:1883"
	}
	if m.ClientID == "" {
		m.ClientID = "didoedge-" + vehicle
	}
	if m.StatsInterval == 0 {
		m.StatsInterval = 5 * time.Second
	}
	if m.KeepAlive == 0 {
		m.KeepAlive = 10 * time.Second
	}
	if m.InFlight == 0 {
		m.InFlight = 16
	}
	if m.CloseTimeout == 0 {
		m.CloseTimeout = 5 * time.Second
	}
	c.Outbox.ApplyDefaults()
	c.Embedded.ApplyDefaults(topicPrefix)
	if c.HomeAssistant.Prefix == "" {
		c.HomeAssistant.Prefix = "homeassistant"
	}
	if c.HomeAssistant.StatusTopic == "" {
		c.HomeAssistant.StatusTopic = c.HomeAssistant.Prefix + "/status"
	}
}

// Validate checks every section; errors name the key path from the alerts
// section ("mqtt.broker: ...", "embedded.users[0].write[0]: ...").
func (c ServiceConfig) Validate(topicPrefix string) error {
	if err := c.MQTT.Validate(); err != nil {
		return fmt.Errorf("mqtt.%w", err)
	}
	if h := c.HomeAssistant; !topicPattern.MatchString(h.Prefix) {
		return fmt.Errorf("homeassistant.prefix: %q must match %s (no wildcards)", h.Prefix, topicPattern)
	} else if !topicPattern.MatchString(h.StatusTopic) {
		return fmt.Errorf("homeassistant.status_topic: %q must match %s (no wildcards)", h.StatusTopic, topicPattern)
	}
	if err := c.Outbox.Validate(); err != nil {
		return fmt.Errorf("outbox.%w", err)
	}
	if err := c.Embedded.Validate(topicPrefix, c.MQTT.Broker == EmbeddedBroker); err != nil {
		return fmt.Errorf("embedded.%w", err)
	}
	return nil
}

// Files are the files the sections name, under key prefix (e.g.
// "alerts."): the connection's (mqtt.) password file and TLS files, then
// the embedded broker's (embedded.).
func (c ServiceConfig) Files(prefix string) []boundedfile.Named {
	return append(c.MQTT.Files(prefix+"mqtt."), c.Embedded.Files(prefix+"embedded.")...)
}

// Files are the files the connection names, under key prefix (e.g.
// "alerts.mqtt."): the password file, then the TLS CA, certificate and
// key (those given).
func (m Config) Files(prefix string) []boundedfile.Named {
	var out []boundedfile.Named
	if m.PasswordFile != "" {
		out = append(out, boundedfile.Named{Key: prefix + "password_file", Path: m.PasswordFile})
	}
	if t := m.TLS; t != nil {
		for _, f := range []boundedfile.Named{{Key: "ca", Path: t.CA}, {Key: "cert", Path: t.Cert}, {Key: "key", Path: t.Key}} {
			if f.Path != "" {
				out = append(out, boundedfile.Named{Key: prefix + "tls." + f.Key, Path: f.Path})
			}
		}
	}
	return out
}

// ResolvePaths makes every relative file path of the sections relative to
// dir, the directory of the config file.
func (c *ServiceConfig) ResolvePaths(dir string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.MQTT.PasswordFile)
	if t := c.MQTT.TLS; t != nil {
		abs(&t.CA)
		abs(&t.Cert)
		abs(&t.Key)
	}
	c.Outbox.ResolvePaths(dir)
	c.Embedded.ResolvePaths(dir)
}

// Validate checks the connection settings; errors name the key within the
// section.
func (m Config) Validate() error {
	if m.SetTopics && m.Broker != EmbeddedBroker && m.Username == "" && (m.TLS == nil || m.TLS.Cert == "") {
		return fmt.Errorf("set_topics: the connection to the external broker %s is not authenticated (give mqtt.username or mqtt.tls.cert): without it the broker need not authenticate the clients that publish on the set topics",
			redact.URL(m.Broker))
	}
	if redact.HasUserInfo(m.Broker) {
		return fmt.Errorf("broker: %q carries credentials in the URL, which would end up in logs: give mqtt.username and mqtt.password_file (or mqtt.password_env) instead",
			redact.URL(m.Broker))
	}
	if m.Broker != EmbeddedBroker {
		if err := checkBrokerURL(m.Broker); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	if m.ClientID == "" || len(m.ClientID) > 128 || strings.ContainsAny(m.ClientID, "/+# ") {
		return fmt.Errorf("client_id: %q must be 1..128 characters without '/', '+', '#' or spaces", m.ClientID)
	}
	if m.PasswordFile != "" && m.PasswordEnv != "" {
		return fmt.Errorf("password_file: give password_file or password_env, not both")
	}
	if (m.PasswordFile != "" || m.PasswordEnv != "") && m.Username == "" {
		return fmt.Errorf("username: required with a password")
	}
	if t := m.TLS; t != nil {
		if (t.Cert == "") != (t.Key == "") {
			return fmt.Errorf("tls.cert: cert and key go together")
		}
	}
	if m.StatsQoS != 0 && m.StatsQoS != 1 {
		return fmt.Errorf("stats_qos: %d, want 0 or 1", m.StatsQoS)
	}
	if m.StatsInterval < 100*time.Millisecond {
		return fmt.Errorf("stats_interval: %v below 100ms", m.StatsInterval)
	}
	if m.KeepAlive < time.Second {
		return fmt.Errorf("keepalive: %v below 1s", m.KeepAlive)
	}
	if m.InFlight < 1 || m.InFlight > 1000 {
		return fmt.Errorf("in_flight: %d outside [1,1000]", m.InFlight)
	}
	if m.CloseTimeout <= 0 {
		return fmt.Errorf("close_timeout: %v must be > 0", m.CloseTimeout)
	}
	return nil
}

// checkBrokerURL checks an MQTT broker URL: scheme, a host and a numeric
// port, nothing else.
func checkBrokerURL(raw string) error {
	if !brokerPattern.MatchString(raw) {
		return fmt.Errorf("%q is neither %q nor a tcp:// or ssl:// URL (scheme://host:port)", raw, EmbeddedBroker)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q: %v", raw, err)
	}
	if u.Hostname() == "" || u.Port() == "" {
		return fmt.Errorf("%q: want scheme://host:port", raw)
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port %q is not a number in 1..65535", raw, u.Port())
	}
	return nil
}
