package runconfig

import (
	"fmt"
	"net"
	"strings"

	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/internal/httpguard"
)

// LiveConfig is the live view (runtime/apps/live, docs/live.md): one
// Foxglove WebSocket listener (protocol foxglove.websocket.v1) for every
// camera, with the control API (/api/...) on the same address. Off when
// Listen is empty (the default).
type LiveConfig struct {
	// Listen is host:port; "" (default) or "off" disables the live view.
	Listen string `yaml:"listen"`
	// TokenFile holds the bearer token clients must present (the
	// Authorization header, or ?token= for Foxglove's connection URL);
	// required when Listen is not a loopback address.
	TokenFile string `yaml:"token_file"`
	// Queue is each client's queue of outgoing messages (default 64); a
	// client that cannot keep up loses its own messages (counted).
	Queue int `yaml:"queue"`
	// Control enables the control API and Foxglove's setParameters
	// (zones, profiles, thresholds, event timings). Default: on for a
	// loopback Listen, off otherwise; true on another address needs the
	// token.
	Control *bool `yaml:"control"`
	// AllowedHosts are the names, besides loopback and the listener's own
	// addresses, that clients use to reach it (van-07.local): any other
	// Host header is refused (421) against DNS rebinding.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedDirs are the directories a control request may name files
	// in (a camera's calibration, intrinsics_file, sequence.dir), after
	// symbolic links are resolved; relative entries are relative to the
	// config file's directory. Default: the config file's directory. A
	// request that names a file elsewhere is refused (422) before the
	// file is opened, so that a request cannot make the runtime read
	// /etc/shadow or /dev/zero.
	AllowedDirs []string `yaml:"allowed_dirs"`
	// AllowedOrigins are the browser origins (scheme://host[:port], e.g.
	// https://app.foxglove.dev) whose pages may change the configuration
	// over the WebSocket (Foxglove's setParameters) without the token.
	// Default none: without a token only clients that are not browser
	// pages (no Origin header: a process of this machine) may; a page
	// of any other origin, a page of this machine's included, may only
	// read (docs/security.md).
	AllowedOrigins []string `yaml:"allowed_origins"`

	// Token is TokenFile's content (trimmed), read when the config is loaded.
	Token string `yaml:"-"`
}

// Enabled reports whether the live view is on.
func (l LiveConfig) Enabled() bool { return l.Listen != "" && l.Listen != HTTPOff }

// ControlEnabled reports whether the control API and parameter changes
// are on.
func (l LiveConfig) ControlEnabled() bool {
	if l.Control != nil {
		return *l.Control
	}
	return IsLoopback(l.Listen)
}

// MinTokenLen is the shortest token accepted (a guessable token is none).
const MinTokenLen = 16

// IsLoopback reports whether a host:port listens on loopback only
// (127.0.0.0/8, ::1 or localhost); an empty host (every interface) is not.
func IsLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Finish applies defaults, reads the token file and validates the
// section; key is "live".
func (l *LiveConfig) Finish(key string) error {
	if l.Queue == 0 {
		l.Queue = 64
	}
	if !l.Enabled() {
		return nil
	}
	if _, _, err := net.SplitHostPort(l.Listen); err != nil {
		return fmt.Errorf("%s.listen: %q is not host:port: %v", key, l.Listen, err)
	}
	if l.Queue < 4 || l.Queue > 4096 {
		return fmt.Errorf("%s.queue: %d is not in 4..4096", key, l.Queue)
	}
	if err := httpguard.ValidateHosts(key+".allowed_hosts", l.AllowedHosts); err != nil {
		return err
	}
	if err := httpguard.ValidateOrigins(key+".allowed_origins", l.AllowedOrigins); err != nil {
		return err
	}
	if l.TokenFile != "" {
		b, err := boundedfile.Read(key+".token_file", l.TokenFile, boundedfile.Secret)
		if err != nil {
			return err
		}
		l.Token = strings.TrimSpace(string(b))
		if len(l.Token) < MinTokenLen {
			return fmt.Errorf("%s.token_file: %q holds a token of %d characters; want at least %d", key, l.TokenFile, len(l.Token), MinTokenLen)
		}
	}
	if !IsLoopback(l.Listen) && l.Token == "" {
		return fmt.Errorf("%s.token_file: required when %s.listen %q is not a loopback address (anyone on the network could watch and change the vehicle's zones)",
			key, key, l.Listen)
	}
	return nil
}
