package alerts

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/internal/redact"
	"github.com/didoedge/didoedge/internal/yamlstrict"
)

// Config is the alerts section of a didoedge deployment: identity, zones,
// event tuning, the MQTT connection, the outbox and the embedded broker.
type Config struct {
	Vehicle     string `yaml:"vehicle"`
	Camera      string `yaml:"camera"`
	TopicPrefix string `yaml:"topic_prefix"`
	// Calibration is the path of the calibration file, relative to the
	// config file; empty means DefaultCalibration.
	Calibration string `yaml:"calibration"`

	ZoneSet `yaml:",inline"`

	Events        EventConfig         `yaml:"events"`
	Snapshots     SnapshotConfig      `yaml:"snapshots"`
	HomeAssistant HomeAssistantConfig `yaml:"homeassistant"`
	MQTT          MQTTConfig          `yaml:"mqtt"`
	Outbox        OutboxConfig        `yaml:"outbox"`
	Embedded      EmbeddedConfig      `yaml:"embedded"`
}

// EventConfig tunes fusion, levels and events (see Timing and
// EngineConfig). The Timing durations are pointers so that an explicit 0
// (off) differs from an absent key (the default).
type EventConfig struct {
	FusionTimeConstant *time.Duration `yaml:"fusion_time_constant"`
	EnterInertia       *time.Duration `yaml:"enter_inertia"`
	CriticalEnter      *time.Duration `yaml:"critical_enter_inertia"` // Timing.CriticalEnterInertia
	ExitInertia        *time.Duration `yaml:"exit_inertia"`
	MinEpisode         *time.Duration `yaml:"min_episode"`
	MergeWindow        *time.Duration `yaml:"merge_window"`
	UpdateInterval     time.Duration  `yaml:"update_interval"`
	CameraStall        time.Duration  `yaml:"camera_stall"`

	// Keys of earlier versions, kept only to name their replacement.
	InertiaFrames any `yaml:"inertia_frames"`
	MinHold       any `yaml:"min_hold"`
}

// Default event timing, chosen with `didoedge bench scenario` (docs/alerts.md).
const (
	DefaultFusionTimeConstant = 50 * time.Millisecond
	DefaultEnterInertia       = 300 * time.Millisecond
	DefaultCriticalEnter      = 0
	DefaultExitInertia        = 200 * time.Millisecond
	DefaultMinEpisode         = time.Second
	DefaultMergeWindow        = time.Second
)

// DefaultTiming is the fusion and hysteresis of a config that sets none.
func DefaultTiming() Timing {
	return Timing{FusionTimeConstant: DefaultFusionTimeConstant, EnterInertia: DefaultEnterInertia, CriticalEnterInertia: DefaultCriticalEnter,
		ExitInertia: DefaultExitInertia, MinEpisode: DefaultMinEpisode, MergeWindow: DefaultMergeWindow}
}

// Timing returns the fusion and hysteresis durations, defaults for keys not given.
func (e EventConfig) Timing() Timing {
	t := DefaultTiming()
	for _, f := range []struct {
		v   *time.Duration
		dst *time.Duration
	}{{e.FusionTimeConstant, &t.FusionTimeConstant}, {e.EnterInertia, &t.EnterInertia},
		{e.CriticalEnter, &t.CriticalEnterInertia}, {e.ExitInertia, &t.ExitInertia},
		{e.MinEpisode, &t.MinEpisode}, {e.MergeWindow, &t.MergeWindow}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	return t
}

// SetTiming sets every Timing duration of the config.
func (e *EventConfig) SetTiming(t Timing) {
	d := func(v time.Duration) *time.Duration { return &v }
	e.FusionTimeConstant, e.EnterInertia, e.ExitInertia = d(t.FusionTimeConstant), d(t.EnterInertia), d(t.ExitInertia)
	e.CriticalEnter = d(t.CriticalEnterInertia)
	e.MinEpisode, e.MergeWindow = d(t.MinEpisode), d(t.MergeWindow)
}

// SnapshotConfig configures event snapshots: a JPEG of the event's frame
// with the epistemic heat map, the zone outline and its level, kept in a
// bounded directory and published retained.
type SnapshotConfig struct {
	// Dir is the on-disk store; empty turns snapshots off.
	Dir string `yaml:"dir"`
	// MaxBytes bounds the store; the oldest snapshots go first.
	MaxBytes int64 `yaml:"max_bytes"`
	// Quality is the JPEG quality, 1..100.
	Quality int `yaml:"quality"`
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

// MQTTConfig configures the publisher's connection.
type MQTTConfig struct {
	// Broker is a URL (tcp://host:port, ssl://host:port) or "embedded".
	Broker   string `yaml:"broker"`
	ClientID string `yaml:"client_id"`
	// Username, and the password from a file or an environment variable.
	Username     string     `yaml:"username"`
	PasswordFile string     `yaml:"password_file"`
	PasswordEnv  string     `yaml:"password_env"`
	TLS          *TLSConfig `yaml:"tls"`
	// StatsQoS is the QoS of stats messages (0 or 1); events are always QoS 1.
	StatsQoS      int           `yaml:"stats_qos"`
	StatsInterval time.Duration `yaml:"stats_interval"`
	KeepAlive     time.Duration `yaml:"keepalive"`
	// InFlight is how many events may await PUBACK at once.
	InFlight int `yaml:"in_flight"`
	// CloseTimeout bounds the flush on shutdown.
	CloseTimeout time.Duration `yaml:"close_timeout"`
}

// TLSConfig names PEM files; paths are relative to the config file.
type TLSConfig struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName overrides the name checked in the broker's certificate.
	ServerName string `yaml:"server_name"`
}

// OutboxConfig configures the durable event queue.
type OutboxConfig struct {
	Dir          string `yaml:"dir"`
	MaxBytes     int64  `yaml:"max_bytes"`
	MaxRecords   int    `yaml:"max_records"`
	SegmentBytes int64  `yaml:"segment_bytes"`
}

// EmbeddedConfig configures the embedded broker used when mqtt.broker is
// "embedded" (and by `didoedge broker`).
type EmbeddedConfig struct {
	// Listen is the plain TCP listener; the runtime's own client connects
	// through it ("off" disables it for `didoedge broker` only).
	Listen string `yaml:"listen"`
	// AllowAnonymous lets clients without credentials read the topic
	// prefix (never publish); meant for the demo.
	AllowAnonymous bool         `yaml:"allow_anonymous"`
	Users          []UserConfig `yaml:"users"`
	// TLS adds a TLS listener.
	TLS *EmbeddedTLSConfig `yaml:"tls"`
	// ConnectTimeout closes connections without a CONNECT (default 5s).
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// MaxConnections bounds open connections (default 64).
	MaxConnections int `yaml:"max_connections"`
	// MessageRate and MessageBurst bound each client's publishes per
	// second (defaults 100 and 200; the runtime's own client is exempt).
	MessageRate  float64 `yaml:"message_rate"`
	MessageBurst int     `yaml:"message_burst"`
	// Store is the broker's persistence (alerts/broker owns the type);
	// its dir defaults to <outbox.dir>/broker in the runtime.
	Store broker.StoreSettings `yaml:"store"`
}

// EmbeddedTLSConfig is the embedded broker's TLS listener; paths are
// relative to the config file.
type EmbeddedTLSConfig struct {
	Listen string `yaml:"listen"`
	Cert   string `yaml:"cert"`
	Key    string `yaml:"key"`
	// ClientCA, when set, requires client certificates signed by it.
	ClientCA string `yaml:"client_ca"`
}

// UserConfig is one broker account; the password comes from a file or the
// environment. Read and Write are the topic filters it may subscribe to
// and publish on: Read defaults to "<topic_prefix>/#", Write to nothing.
type UserConfig struct {
	Username     string   `yaml:"username"`
	PasswordFile string   `yaml:"password_file"`
	PasswordEnv  string   `yaml:"password_env"`
	Read         []string `yaml:"read"`
	Write        []string `yaml:"write"`
}

// RuntimeUser is the username of the runtime's own client of its embedded
// broker (a password is made at every start); config users may not take it.
const RuntimeUser = "didoedge-runtime"

// EmbeddedBroker is the value of mqtt.broker that starts the embedded broker.
const EmbeddedBroker = "embedded"

var (
	vehiclePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	prefixPattern  = regexp.MustCompile(`^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$`)
	brokerPattern  = regexp.MustCompile(`^(tcp|ssl|tls|mqtt|mqtts)://[^/]+$`)
)

// LoadConfig reads, defaults and validates a config file. Relative paths
// in it are made relative to the file's directory.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("load alerts config: %w", err)
	}
	c, err := ParseConfig(path, data)
	if err != nil {
		return Config{}, err
	}
	c.ResolvePaths(filepath.Dir(path))
	return c, nil
}

// ParseConfig parses, defaults and validates config data; name labels errors.
func ParseConfig(name string, data []byte) (Config, error) {
	var c Config
	if err := yamlstrict.Decode(data, &c); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// ParseSharedConfig parses the alerts section of a multi-camera runtime:
// the cameras are named elsewhere (each with its zones or the section's),
// so camera must be absent and zones may be. Everything else is defaulted
// and validated as ParseConfig does.
func ParseSharedConfig(name string, data []byte) (Config, error) {
	var c Config
	if err := yamlstrict.Decode(data, &c); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	if c.Camera != "" {
		return Config{}, fmt.Errorf("%s: camera: %q: with a cameras list each camera is named by its own name key; leave camera out", name, c.Camera)
	}
	c.applyDefaults()
	if err := c.validate(false); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// HasZones reports whether the set names any zone (zones or grid).
func (zs ZoneSet) HasZones() bool { return len(zs.Zones) > 0 || zs.Grid != nil }

// ValidCamera checks a camera id (a topic level and part of episode ids).
func ValidCamera(id string) error {
	if !cameraPattern.MatchString(id) {
		return fmt.Errorf("%q must match %s", id, cameraPattern)
	}
	return nil
}

func (c *Config) applyDefaults() {
	if c.TopicPrefix == "" {
		c.TopicPrefix = "didoedge"
	}
	e := &c.Events
	e.SetTiming(e.Timing())
	if e.CameraStall == 0 {
		e.CameraStall = 2 * time.Second
	}
	m := &c.MQTT
	if m.Broker == "" {
		m.Broker = "tcp://127.0.0.1:1883"
	}
	if m.ClientID == "" {
		m.ClientID = "didoedge-" + c.Vehicle
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
	o := &c.Outbox
	if o.MaxBytes == 0 {
		o.MaxBytes = 64 << 20
	}
	if o.MaxRecords == 0 {
		o.MaxRecords = 100000
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = 4 << 20
	}
	em := &c.Embedded
	if em.Listen == "" {
		em.Listen = "127.0.0.1:1883"
	}
	if em.ConnectTimeout == 0 {
		em.ConnectTimeout = 5 * time.Second
	}
	if em.MaxConnections == 0 {
		em.MaxConnections = 64
	}
	if em.MessageRate == 0 {
		em.MessageRate = 100
	}
	if em.MessageBurst == 0 {
		em.MessageBurst = 200
	}
	em.Store.SetDefaults()
	for i := range em.Users {
		if em.Users[i].Read == nil {
			em.Users[i].Read = []string{c.TopicPrefix + "/#"}
		}
	}
	if c.Snapshots.MaxBytes == 0 {
		c.Snapshots.MaxBytes = 64 << 20
	}
	if c.Snapshots.Quality == 0 {
		c.Snapshots.Quality = 80
	}
	if c.HomeAssistant.Prefix == "" {
		c.HomeAssistant.Prefix = "homeassistant"
	}
	if c.HomeAssistant.StatusTopic == "" {
		c.HomeAssistant.StatusTopic = c.HomeAssistant.Prefix + "/status"
	}
}

// Validate checks the config; errors name the key path.
func (c *Config) Validate() error { return c.validate(true) }

// validate checks the config; single is false for the shared section of a
// multi-camera runtime (no camera id, zones optional).
func (c *Config) validate(single bool) error {
	if !vehiclePattern.MatchString(c.Vehicle) {
		return fmt.Errorf("vehicle: %q must match %s", c.Vehicle, vehiclePattern)
	}
	if single && !cameraPattern.MatchString(c.Camera) {
		return fmt.Errorf("camera: %q must match %s", c.Camera, cameraPattern)
	}
	if !prefixPattern.MatchString(c.TopicPrefix) {
		return fmt.Errorf("topic_prefix: %q must match %s (no wildcards)", c.TopicPrefix, prefixPattern)
	}
	if single || c.ZoneSet.HasZones() || len(c.ZoneSet.Ignore) > 0 {
		if err := c.ZoneSet.Validate(""); err != nil {
			return err
		}
	}
	e := c.Events
	if e.InertiaFrames != nil {
		return fmt.Errorf("events.inertia_frames: removed: levels now follow time, not frame counts; use events.enter_inertia " +
			"(how long the fused signals must ask for a higher level, e.g. 2 frames at 15 fps = 133ms) and events.exit_inertia")
	}
	if e.MinHold != nil {
		return fmt.Errorf("events.min_hold: removed: use events.min_episode (an episode is not ended before it lasted this long) " +
			"and events.exit_inertia (how long the fused signals must ask for a lower level)")
	}
	if err := e.Timing().Validate("events"); err != nil {
		return err
	}
	if e.UpdateInterval < 0 {
		return fmt.Errorf("events.update_interval: %v is negative", e.UpdateInterval)
	}
	if e.CameraStall < 0 {
		return fmt.Errorf("events.camera_stall: %v is negative", e.CameraStall)
	}
	m := c.MQTT
	if redact.HasUserInfo(m.Broker) {
		return fmt.Errorf("mqtt.broker: %q carries credentials in the URL, which would end up in logs: give mqtt.username and mqtt.password_file (or mqtt.password_env) instead",
			redact.URL(m.Broker))
	}
	if m.Broker != EmbeddedBroker {
		if err := checkBrokerURL(m.Broker); err != nil {
			return fmt.Errorf("mqtt.broker: %w", err)
		}
	}
	if m.ClientID == "" || len(m.ClientID) > 128 || strings.ContainsAny(m.ClientID, "/+# ") {
		return fmt.Errorf("mqtt.client_id: %q must be 1..128 characters without '/', '+', '#' or spaces", m.ClientID)
	}
	if m.PasswordFile != "" && m.PasswordEnv != "" {
		return fmt.Errorf("mqtt.password_file: give password_file or password_env, not both")
	}
	if (m.PasswordFile != "" || m.PasswordEnv != "") && m.Username == "" {
		return fmt.Errorf("mqtt.username: required with a password")
	}
	if t := m.TLS; t != nil {
		if (t.Cert == "") != (t.Key == "") {
			return fmt.Errorf("mqtt.tls.cert: cert and key go together")
		}
	}
	if m.StatsQoS != 0 && m.StatsQoS != 1 {
		return fmt.Errorf("mqtt.stats_qos: %d, want 0 or 1", m.StatsQoS)
	}
	if m.StatsInterval < 100*time.Millisecond {
		return fmt.Errorf("mqtt.stats_interval: %v below 100ms", m.StatsInterval)
	}
	if m.KeepAlive < time.Second {
		return fmt.Errorf("mqtt.keepalive: %v below 1s", m.KeepAlive)
	}
	if m.InFlight < 1 || m.InFlight > 1000 {
		return fmt.Errorf("mqtt.in_flight: %d outside [1,1000]", m.InFlight)
	}
	if m.CloseTimeout <= 0 {
		return fmt.Errorf("mqtt.close_timeout: %v must be > 0", m.CloseTimeout)
	}
	if sn := c.Snapshots; sn.Dir != "" {
		if sn.MaxBytes < 1<<20 {
			return fmt.Errorf("snapshots.max_bytes: %d below 1 MiB", sn.MaxBytes)
		}
		if sn.Quality < 1 || sn.Quality > 100 {
			return fmt.Errorf("snapshots.quality: %d outside [1,100]", sn.Quality)
		}
	}
	if h := c.HomeAssistant; !prefixPattern.MatchString(h.Prefix) {
		return fmt.Errorf("homeassistant.prefix: %q must match %s (no wildcards)", h.Prefix, prefixPattern)
	} else if !prefixPattern.MatchString(h.StatusTopic) {
		return fmt.Errorf("homeassistant.status_topic: %q must match %s (no wildcards)", h.StatusTopic, prefixPattern)
	}
	o := c.Outbox
	if o.Dir == "" {
		return fmt.Errorf("outbox.dir: required (events must survive restarts)")
	}
	if o.MaxBytes < 64<<10 {
		return fmt.Errorf("outbox.max_bytes: %d below 65536", o.MaxBytes)
	}
	if o.MaxRecords < 16 {
		return fmt.Errorf("outbox.max_records: %d below 16", o.MaxRecords)
	}
	if o.SegmentBytes < 4<<10 || o.SegmentBytes > o.MaxBytes {
		return fmt.Errorf("outbox.segment_bytes: %d outside [4096, max_bytes]", o.SegmentBytes)
	}
	if err := c.validateEmbedded(); err != nil {
		return err
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

// validateEmbedded checks the embedded broker section: addresses, users
// and their grants. With mqtt.broker "embedded", only the runtime's own
// client may publish under topic_prefix, so no user's write grant may
// reach into it.
func (c *Config) validateEmbedded() error {
	em := c.Embedded
	embedded := c.MQTT.Broker == EmbeddedBroker
	if em.Listen == broker.Off {
		if embedded {
			return errors.New("embedded.listen: off, but the runtime's own client connects through it (keep it on 127.0.0.1)")
		}
	} else if err := broker.CheckAddress(em.Listen); err != nil {
		return fmt.Errorf("embedded.listen: %w", err)
	}
	if t := em.TLS; t != nil {
		if err := broker.CheckAddress(t.Listen); err != nil {
			return fmt.Errorf("embedded.tls.listen: %w", err)
		}
		if t.Cert == "" || t.Key == "" {
			return errors.New("embedded.tls.cert: cert and key are required")
		}
	}
	if em.ConnectTimeout < 100*time.Millisecond || em.ConnectTimeout > time.Minute {
		return fmt.Errorf("embedded.connect_timeout: %v outside [100ms, 1m]", em.ConnectTimeout)
	}
	if em.MaxConnections < 1 || em.MaxConnections > 100000 {
		return fmt.Errorf("embedded.max_connections: %d outside [1, 100000]", em.MaxConnections)
	}
	if !(em.MessageRate > 0) || em.MessageRate > 1e6 {
		return fmt.Errorf("embedded.message_rate: %g outside (0, 1e6]", em.MessageRate)
	}
	if em.MessageBurst < 1 || em.MessageBurst > 1e6 {
		return fmt.Errorf("embedded.message_burst: %d outside [1, 1e6]", em.MessageBurst)
	}
	if err := em.Store.Validate("embedded.store"); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, u := range em.Users {
		p := fmt.Sprintf("embedded.users[%d]", i)
		switch {
		case u.Username == "":
			return fmt.Errorf("%s.username: required", p)
		case u.Username == RuntimeUser:
			return fmt.Errorf("%s.username: %q is reserved for the runtime's own client", p, RuntimeUser)
		case seen[u.Username]:
			return fmt.Errorf("%s.username: %q listed twice", p, u.Username)
		}
		seen[u.Username] = true
		if (u.PasswordFile == "") == (u.PasswordEnv == "") {
			return fmt.Errorf("%s.password_file: give exactly one of password_file or password_env", p)
		}
		for j, f := range u.Read {
			if err := broker.CheckFilter(f); err != nil {
				return fmt.Errorf("%s.read[%d]: %q: %w", p, j, f, err)
			}
		}
		for j, f := range u.Write {
			if err := broker.CheckFilter(f); err != nil {
				return fmt.Errorf("%s.write[%d]: %q: %w", p, j, f, err)
			}
			if embedded && reaches(f, c.TopicPrefix) {
				return fmt.Errorf("%s.write[%d]: %q reaches into topic_prefix %q: only the runtime's own client may publish there", p, j, f, c.TopicPrefix)
			}
		}
	}
	if embedded && len(em.Users) == 0 && !em.AllowAnonymous {
		return errors.New("embedded.users: no users and allow_anonymous is false: nobody could read the alerts")
	}
	return nil
}

// reaches reports whether the filter f matches the prefix itself or any
// topic under it.
func reaches(f, prefix string) bool {
	fl, pl := strings.Split(f, "/"), strings.Split(prefix, "/")
	for i, l := range fl {
		if l == "#" {
			return true
		}
		if i >= len(pl) {
			return true // a topic below the prefix
		}
		if l != "+" && l != pl[i] {
			return false
		}
	}
	return len(fl) >= len(pl)
}

// ResolvePaths makes the config's relative file paths (calibration, MQTT
// password file and TLS files, outbox dir, embedded users' password files)
// relative to dir, the directory of the file they were read from.
func (c *Config) ResolvePaths(dir string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.Calibration)
	abs(&c.MQTT.PasswordFile)
	abs(&c.Outbox.Dir)
	abs(&c.Snapshots.Dir)
	if t := c.MQTT.TLS; t != nil {
		abs(&t.CA)
		abs(&t.Cert)
		abs(&t.Key)
	}
	for i := range c.Embedded.Users {
		abs(&c.Embedded.Users[i].PasswordFile)
	}
	abs(&c.Embedded.Store.Dir)
	if t := c.Embedded.TLS; t != nil {
		abs(&t.Cert)
		abs(&t.Key)
		abs(&t.ClientCA)
	}
}

// LoadCalibrationFor returns the calibration the config names, or the
// defaults when it names none.
func (c *Config) LoadCalibrationFor() (Calibration, error) {
	if c.Calibration == "" {
		return DefaultCalibration(), nil
	}
	return LoadCalibration(c.Calibration)
}

// EngineConfig derives the engine's configuration.
func (c *Config) EngineConfig() EngineConfig {
	return EngineConfig{Vehicle: c.Vehicle, Camera: c.Camera, Timing: c.Events.Timing(),
		UpdateInterval: c.Events.UpdateInterval, StallAfter: c.Events.CameraStall, StatsInterval: c.MQTT.StatsInterval}
}

// EngineSpec loads the calibration and resolves the zones: everything an
// Engine is built from. key prefixes zone errors (e.g. "alerts" when the
// config is embedded under that key).
func (c *Config) EngineSpec(key string) (EngineSpec, error) {
	cal, err := c.LoadCalibrationFor()
	if err != nil {
		return EngineSpec{}, err
	}
	zones, ignore, err := c.ZoneSet.Resolve(key)
	if err != nil {
		if key == "" {
			err = fmt.Errorf("alerts config: %w", err)
		}
		return EngineSpec{}, err
	}
	return EngineSpec{Config: c.EngineConfig(), Zones: zones, Ignore: ignore, Calibration: cal}, nil
}

// Topics returns the topic builder of the config.
func (c *Config) Topics() Topics { return Topics{Prefix: c.TopicPrefix, Vehicle: c.Vehicle} }

// ReadSecret reads a password from a file (trailing newline trimmed) or an
// environment variable; key names the config key in errors.
func ReadSecret(key, file, env string) (string, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", key, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("%s: environment variable %s is not set", key, env)
		}
		return v, nil
	}
	return "", nil
}
