package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/didoedge/didoedge/internal/boundedfile"
)

// Config is the embedded broker section of a deployment (alerts.embedded),
// used when mqtt.broker is "embedded" and by `didoedge broker`.
type Config struct {
	// Listen is the plain TCP listener; the runtime's own client connects
	// through it ("off" disables it for `didoedge broker` only).
	Listen string `yaml:"listen"`
	// AllowAnonymous lets clients without credentials read the topic
	// prefix (never publish); meant for the demo.
	AllowAnonymous bool         `yaml:"allow_anonymous"`
	Users          []UserConfig `yaml:"users"`
	// TLS adds a TLS listener.
	TLS *TLSListenerConfig `yaml:"tls"`
	// ConnectTimeout closes connections without a CONNECT (default 5s).
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// MaxConnections bounds open connections (default 64).
	MaxConnections int `yaml:"max_connections"`
	// MessageRate and MessageBurst bound each client's publishes per
	// second (defaults 100 and 200; the runtime's own client is exempt).
	MessageRate  float64 `yaml:"message_rate"`
	MessageBurst int     `yaml:"message_burst"`
	// Store is the broker's persistence; its dir defaults to
	// <outbox.dir>/broker in the runtime.
	Store StoreSettings `yaml:"store"`
}

// TLSListenerConfig is the embedded broker's TLS listener; paths are
// relative to the config file.
type TLSListenerConfig struct {
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

// ApplyDefaults fills the keys left out; users may read the topic prefix
// unless they say otherwise.
func (c *Config) ApplyDefaults(topicPrefix string) {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = 64
	}
	if c.MessageRate == 0 {
		c.MessageRate = 100
	}
	if c.MessageBurst == 0 {
		c.MessageBurst = 200
	}
	c.Store.SetDefaults()
	for i := range c.Users {
		if c.Users[i].Read == nil {
			c.Users[i].Read = []string{topicPrefix + "/#"}
		}
	}
}

// Validate checks addresses, users and their grants; errors name the key
// within the section. runtimeClient is true when the runtime publishes
// through this broker (mqtt.broker "embedded"): only the runtime's own
// client may then publish under topicPrefix, so no user's write grant may
// reach into it, the plain listener must stay on, and someone must be able
// to read the alerts.
func (c Config) Validate(topicPrefix string, runtimeClient bool) error {
	if c.Listen == Off {
		if runtimeClient {
			return errors.New("listen: off, but the runtime's own client connects through it (keep it on 127.0.0.1)")
		}
	} else if err := CheckAddress(c.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if t := c.TLS; t != nil {
		if err := CheckAddress(t.Listen); err != nil {
			return fmt.Errorf("tls.listen: %w", err)
		}
		if t.Cert == "" || t.Key == "" {
			return errors.New("tls.cert: cert and key are required")
		}
	}
	if c.ConnectTimeout < 100*time.Millisecond || c.ConnectTimeout > time.Minute {
		return fmt.Errorf("connect_timeout: %v outside [100ms, 1m]", c.ConnectTimeout)
	}
	if c.MaxConnections < 1 || c.MaxConnections > 100000 {
		return fmt.Errorf("max_connections: %d outside [1, 100000]", c.MaxConnections)
	}
	if !(c.MessageRate > 0) || c.MessageRate > 1e6 {
		return fmt.Errorf("message_rate: %g outside (0, 1e6]", c.MessageRate)
	}
	if c.MessageBurst < 1 || c.MessageBurst > 1e6 {
		return fmt.Errorf("message_burst: %d outside [1, 1e6]", c.MessageBurst)
	}
	if err := c.Store.Validate("store"); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, u := range c.Users {
		p := fmt.Sprintf("users[%d]", i)
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
			if err := CheckFilter(f); err != nil {
				return fmt.Errorf("%s.read[%d]: %q: %w", p, j, f, err)
			}
		}
		for j, f := range u.Write {
			if err := CheckFilter(f); err != nil {
				return fmt.Errorf("%s.write[%d]: %q: %w", p, j, f, err)
			}
			if runtimeClient && reaches(f, topicPrefix) && !SetTopicFilter(f) {
				return fmt.Errorf("%s.write[%d]: %q reaches into topic_prefix %q: only the runtime's own client may publish there (except on set topics: a filter whose last level is \"set\")", p, j, f, topicPrefix)
			}
		}
	}
	if runtimeClient && len(c.Users) == 0 && !c.AllowAnonymous {
		return errors.New("users: no users and allow_anonymous is false: nobody could read the alerts")
	}
	return nil
}

// reaches reports whether the filter f matches the prefix itself or any
// topic under it.
// SetTopicFilter reports whether a write grant reaches only control set
// topics (mqtt.set_topics: <prefix>/<vehicle>/<camera>/zones/set,
// <prefix>/<vehicle>/profile/set): its last level is the literal "set".
// The runtime publishes no topic whose last level is "set" (its results
// go to .../set/result, which such a filter does not match), so a user
// granted one can change the vehicle but never forge its alerts.
func SetTopicFilter(f string) bool {
	levels := strings.Split(f, "/")
	return levels[len(levels)-1] == "set"
}

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

// Files are the files the section names, under key prefix (e.g.
// "alerts.embedded."): the users' password files, then the TLS listener's
// certificate, key and client CA (those given).
func (c Config) Files(prefix string) []boundedfile.Named {
	var out []boundedfile.Named
	for i, u := range c.Users {
		if u.PasswordFile != "" {
			out = append(out, boundedfile.Named{Key: fmt.Sprintf("%susers[%d].password_file", prefix, i), Path: u.PasswordFile})
		}
	}
	if t := c.TLS; t != nil {
		for _, f := range []boundedfile.Named{{Key: "cert", Path: t.Cert}, {Key: "key", Path: t.Key}, {Key: "client_ca", Path: t.ClientCA}} {
			if f.Path != "" {
				out = append(out, boundedfile.Named{Key: prefix + "tls." + f.Key, Path: f.Path})
			}
		}
	}
	return out
}

// ResolvePaths makes the section's relative file paths (users' password
// files, TLS files) relative to dir, the directory of the config file.
func (c *Config) ResolvePaths(dir string) {
	for i := range c.Users {
		resolve(dir, &c.Users[i].PasswordFile)
	}
	resolve(dir, &c.Store.Dir)
	if t := c.TLS; t != nil {
		resolve(dir, &t.Cert)
		resolve(dir, &t.Key)
		resolve(dir, &t.ClientCA)
	}
}

func resolve(dir string, p *string) {
	if *p != "" && !filepath.IsAbs(*p) {
		*p = filepath.Join(dir, *p)
	}
}
