package httpguard

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Browser origins. A WebSocket handshake has no CORS: any page may open a
// WebSocket to 127.0.0.1, and the only thing the server learns about the
// page is its Origin header, which the browser sets and no script can
// change (RFC 6455 section 4.1 and 10.2: browsers send it, servers decide
// on it). An allow-list of origins is therefore a proof that a page
// cannot forge; a client without an Origin header is not a browser page.

// NormalizeOrigin returns origin as browsers serialize it (RFC 6454
// section 6.2): lower-case scheme and host, the port only when it is not
// the scheme's default, no path, query, fragment or user. Only http and
// https origins are accepted: an opaque origin ("null", file://) names
// no site and proves nothing.
func NormalizeOrigin(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil {
		return "", fmt.Errorf("%q is not an origin: %v", origin, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("%q is not an http or https origin (scheme://host[:port])", origin)
	}
	if u.Opaque != "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("%q is not an origin: only scheme://host[:port], no path, query or user", origin)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("%q has no host", origin)
	}
	// A DNS name or an IP address without zone, as browsers write them.
	if net.ParseIP(host) == nil && (len(host) > 253 || !hostPattern.MatchString(host)) {
		return "", fmt.Errorf("%q: host %q is not a DNS name or IP address", origin, host)
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

// ValidateOrigins checks an allowed_origins list (key names it in errors).
func ValidateOrigins(key string, origins []string) error {
	for i, o := range origins {
		if _, err := NormalizeOrigin(o); err != nil {
			return fmt.Errorf("%s[%d]: %w", key, i, err)
		}
	}
	return nil
}

// Origins is a set of allowed origins, compared as NormalizeOrigin writes
// them.
type Origins map[string]bool

// NewOrigins builds the set; entries that do not normalize are left out
// (ValidateOrigins refuses them at load).
func NewOrigins(origins []string) Origins {
	s := make(Origins, len(origins))
	for _, o := range origins {
		if n, err := NormalizeOrigin(o); err == nil {
			s[n] = true
		}
	}
	return s
}

// Has reports whether an Origin header names an allowed origin.
func (s Origins) Has(origin string) bool {
	if len(s) == 0 || origin == "" {
		return false
	}
	n, err := NormalizeOrigin(origin)
	return err == nil && s[n]
}
