package httpguard

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWrap drives a real listener on 127.0.0.1 with the Host, method and
// headers a browser page (or curl) would send.
func TestWrap(t *testing.T) {
	var reached int
	srv := httptest.NewServer(Wrap(Policy{Listener: "test", HostsKey: "http.allowed_hosts", Hosts: []string{"van-07.local"}, Token: "0123456789abcdef"},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++; io.WriteString(w, "ok") })))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, c := range []struct {
		name, method, host string
		header             map[string]string
		code               int
		msg                string
	}{
		{"loopback address", "GET", "127.0.0.1:" + port, nil, 200, ""},
		{"other loopback address", "GET", "127.0.0.2:" + port, nil, 200, ""},
		{"ipv6 loopback", "GET", "[::1]:" + port, nil, 200, ""},
		{"localhost", "GET", "localhost:" + port, nil, 200, ""},
		{"localhost subdomain", "GET", "app.localhost:" + port, nil, 200, ""},
		{"configured name, any case, trailing dot", "GET", "VAN-07.local.:" + port, nil, 200, ""},
		{"configured name without port", "GET", "van-07.local", nil, 200, ""},
		{"rebinding name", "GET", "rebind.test:" + port, nil, 421, `Host "rebind.test:` + port + `" is not a name this listener serves (loopback, its own address, or http.allowed_hosts)`},
		{"name that ends like a configured one", "GET", "evil-van-07.local:" + port, nil, 421, "DNS rebinding"},
		{"localhost as a prefix", "GET", "localhost.evil.example:" + port, nil, 421, "DNS rebinding"},
		{"address the connection did not arrive on", "GET", "10.1.2.3:" + port, nil, 421, "DNS rebinding"},
		{"rebinding name, with the proof", "POST", "rebind.test:" + port, map[string]string{ProofHeader: "1"}, 421, "DNS rebinding"},
		{"POST without proof", "POST", "127.0.0.1:" + port, nil, 403, "a POST needs the header X-Didoedge-Request: 1"},
		{"PUT with a wrong proof", "PUT", "127.0.0.1:" + port, map[string]string{ProofHeader: "yes"}, 403, "a PUT needs the header"},
		{"DELETE with the proof", "DELETE", "127.0.0.1:" + port, map[string]string{ProofHeader: "1"}, 200, ""},
		{"POST with the token", "POST", "127.0.0.1:" + port, map[string]string{"Authorization": "Bearer 0123456789abcdef"}, 200, ""},
		{"POST with a wrong token", "POST", "127.0.0.1:" + port, map[string]string{"Authorization": "Bearer 0123456789abcdeX"}, 403, "needs the header"},
		{"CORS preflight", "OPTIONS", "127.0.0.1:" + port, map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Headers": "x-didoedge-request"}, 403, "no CORS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := reached
			req, err := http.NewRequest(c.method, srv.URL+"/api/x", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = c.host
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body := string(raw)
			var e struct{ Error string }
			if json.Unmarshal(raw, &e) == nil && e.Error != "" {
				body = e.Error
			}
			if resp.StatusCode != c.code || !strings.Contains(body, c.msg) {
				t.Fatalf("%s %s: %d %s, want %d with %q", c.method, c.host, resp.StatusCode, body, c.code, c.msg)
			}
			if got := reached - before; (c.code == 200) != (got == 1) {
				t.Fatalf("handler reached %d times for a %d", got, c.code)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Fatalf("a CORS grant: %v", resp.Header)
			}
		})
	}
}

// TestOwnAddress: an IP literal Host is accepted when it is the address
// the connection arrived on (a vehicle reached by its address), refused
// otherwise.
func TestOwnAddress(t *testing.T) {
	h := Wrap(Policy{Listener: "test"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, c := range []struct {
		host string
		code int
	}{{"192.0.2.7:8080", 200}, {"192.0.2.8:8080", 421}, {"[2001:db8::1]:8080", 421}} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = c.host
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 8080}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code {
			t.Errorf("Host %s on a connection to 192.0.2.7: %d, want %d", c.host, rec.Code, c.code)
		}
	}
}

func TestValidateHosts(t *testing.T) {
	for _, c := range []struct {
		hosts []string
		err   string
	}{
		{[]string{"van-07.local", "192.168.1.5", "::1", "a.b.c"}, ""},
		{[]string{"ok", "van-07.local:8080"}, `allowed_hosts[1]: "van-07.local:8080" is not a host name`},
		{[]string{"*.local"}, `allowed_hosts[0]: "*.local"`},
		{[]string{"http://van"}, `allowed_hosts[0]`},
		{[]string{"Van.Local"}, `allowed_hosts[0]`},
		{[]string{""}, `allowed_hosts[0]`},
	} {
		err := ValidateHosts("allowed_hosts", c.hosts)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: %v, want %q", c.hosts, err, c.err)
		}
	}
}

// FuzzHost: any Host header is answered without a panic, and a name that
// is neither loopback, localhost nor configured is never let through.
func FuzzHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "[::1]:1", "rebind.test:80", "localhost", "[", "]:", "a.localhost.", "VAN-07.LOCAL", ":80", "[fe80::1%eth0]:80"} {
		f.Add(s)
	}
	h := Wrap(Policy{Listener: "fuzz", Hosts: []string{"van-07.local"}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	f.Fuzz(func(t *testing.T, host string) {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == 200 && strings.Contains(strings.ToLower(host), "rebind.test") && !strings.Contains(strings.ToLower(host), "localhost") {
			t.Fatalf("Host %q let through", host)
		}
	})
}
