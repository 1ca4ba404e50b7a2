package httpguard

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
)

// ProofHeader is the header a non-GET request carries to prove it does
// not come from another site's page (its value must be "1"); curl and
// the debug page send it, a cross-origin page cannot without a CORS
// preflight, which the guard refuses.
const ProofHeader = "X-Didoedge-Request"

// Policy is what one listener accepts.
type Policy struct {
	// Listener names the listener in refusals ("debug page", "live").
	Listener string
	// HostsKey is the config key of Hosts, named in refusals
	// ("http.allowed_hosts").
	HostsKey string
	// Hosts are the names, besides loopback and the listener's own
	// addresses, that clients use to reach it (van-07.local). Compared
	// without the port, case-insensitively; no wildcards.
	Hosts []string
	// Token, when set, also proves a changing request (Authorization:
	// Bearer TOKEN or ?token=TOKEN); the listener still checks it on
	// every request itself.
	Token string
}

var hostPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?)*$`)

// ValidateHosts checks an allowed_hosts list (key names it in errors):
// DNS names or IP addresses, without port, scheme or wildcard.
func ValidateHosts(key string, hosts []string) error {
	for i, h := range hosts {
		if net.ParseIP(h) != nil {
			continue
		}
		if len(h) > 253 || !hostPattern.MatchString(h) {
			return fmt.Errorf("%s[%d]: %q is not a host name (lower-case DNS name or IP address, no port, scheme or wildcard)", key, i, h)
		}
	}
	return nil
}

// Wrap returns h behind the policy's checks.
func Wrap(p Policy, h http.Handler) http.Handler {
	hosts := make(map[string]bool, len(p.Hosts))
	for _, n := range p.Hosts {
		hosts[normalize(n)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.hostAllowed(hosts, r) {
			refuse(w, http.StatusMisdirectedRequest, fmt.Sprintf(
				"%s: Host %q is not a name this listener serves (loopback, its own address, or %s): refused against DNS rebinding",
				p.Listener, r.Host, p.HostsKey))
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			// A CORS preflight: never granted, so that a page of another
			// origin cannot send the proof header.
			refuse(w, http.StatusForbidden, p.Listener+": cross-origin requests are not allowed (no CORS)")
			return
		default:
			if r.Header.Get(ProofHeader) != "1" && !p.tokenGiven(r) {
				refuse(w, http.StatusForbidden, fmt.Sprintf(
					"%s: a %s needs the header %s: 1 (or the token): a page of another site cannot send it", p.Listener, r.Method, ProofHeader))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether r's Host names this listener.
func (p Policy) hostAllowed(hosts map[string]bool, r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = normalize(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if host == "" {
		return false // HTTP/1.0 without Host: no name to check
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || hosts[host] {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	// The address the client connected to, written as a literal: no name
	// was resolved, so no rebinding.
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ta, ok := la.(*net.TCPAddr); ok && ta.IP.Equal(ip) {
			return true
		}
	}
	return false
}

func (p Policy) tokenGiven(r *http.Request) bool {
	if p.Token == "" {
		return false
	}
	got := r.URL.Query().Get("token")
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		got = strings.TrimPrefix(h, "Bearer ")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(p.Token)) == 1
}

func normalize(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
