package runconfig

import (
	"fmt"
	"net"

	"github.com/didoedge/didoedge/internal/httpguard"
)

// HTTPConfig is the debug page, /metrics, /healthz and /readyz.
type HTTPConfig struct {
	// Listen is the bind address (default 127.0.0.1:8080); "off" disables.
	Listen string `yaml:"listen"`
	// MaxFPS bounds how often maps are copied for the page (default 4).
	MaxFPS float64 `yaml:"max_fps"`
	// AllowedHosts are the names, besides loopback and the listener's own
	// addresses, that browsers and scrapers use to reach the page
	// (van-07.local): any other Host header is refused (421) against DNS
	// rebinding (internal/httpguard, docs/security.md).
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// HTTPOff disables the HTTP server.
const HTTPOff = "off"

func (h *HTTPConfig) defaults() {
	if h.Listen == "" {
		h.Listen = "127.0.0.1:8080"
	}
	if h.MaxFPS == 0 {
		h.MaxFPS = 4
	}
}

// validate checks the section; errors name http.<key>.
func (h HTTPConfig) validate() []error {
	var errs []error
	if h.Listen != HTTPOff {
		if _, _, err := net.SplitHostPort(h.Listen); err != nil {
			errs = append(errs, fmt.Errorf("http.listen: %q is not host:port (or %q): %v", h.Listen, HTTPOff, err))
		}
	}
	if err := httpguard.ValidateHosts("http.allowed_hosts", h.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	if !(h.MaxFPS > 0) || h.MaxFPS > 30 {
		errs = append(errs, fmt.Errorf("http.max_fps: %g must be in (0, 30]", h.MaxFPS))
	}
	return errs
}
