package httpguard

import (
	"strings"
	"testing"
)

func TestNormalizeOrigin(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"https://app.foxglove.dev", "https://app.foxglove.dev", ""},
		{"HTTPS://App.Foxglove.DEV:443", "https://app.foxglove.dev", ""},
		{"http://127.0.0.1:3000", "http://127.0.0.1:3000", ""},
		{"http://localhost:80/", "http://localhost", ""},
		{"http://[::1]:8080", "http://[::1]:8080", ""},
		{"null", "", "not an http or https origin"},
		{"file://", "", "not an http or https origin"},
		{"ws://127.0.0.1:8765", "", "not an http or https origin"},
		{"https://app.foxglove.dev/path", "", "no path"},
		{"https://user@app.foxglove.dev", "", "no path, query or user"},
		{"https://app.foxglove.dev?x=1", "", "no path"},
		{"https://", "", "has no host"},
		{"app.foxglove.dev", "", "not an http or https origin"},
	} {
		got, err := NormalizeOrigin(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %q, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestOrigins(t *testing.T) {
	s := NewOrigins([]string{"https://app.foxglove.dev", "http://127.0.0.1:3000"})
	for _, c := range []struct {
		origin string
		want   bool
	}{
		{"https://app.foxglove.dev", true},
		{"https://app.foxglove.dev:443", true},
		{"http://app.foxglove.dev", false},       // another scheme is another origin
		{"https://evil.app.foxglove.dev", false}, // no wildcards
		{"https://app.foxglove.dev.evil", false}, // nor suffixes
		{"http://127.0.0.1:3001", false},         // another port is another origin
		{"http://127.0.0.1:3000", true},
		{"null", false},
		{"", false},
	} {
		if got := s.Has(c.origin); got != c.want {
			t.Errorf("Has(%q) = %v, want %v", c.origin, got, c.want)
		}
	}
	if err := ValidateOrigins("live.allowed_origins", []string{"https://app.foxglove.dev", "https://*.foxglove.dev/x"}); err == nil || !strings.Contains(err.Error(), "live.allowed_origins[1]") {
		t.Errorf("a bad entry: %v, want an error naming live.allowed_origins[1]", err)
	}
	if NewOrigins(nil).Has("https://app.foxglove.dev") {
		t.Error("an empty list allows an origin")
	}
}

// FuzzOrigin: no Origin header panics the check; an accepted origin is
// its own normal form (idempotent), and a set allows exactly the
// normalized origins it holds.
func FuzzOrigin(f *testing.F) {
	for _, s := range []string{"https://app.foxglove.dev", "HTTP://LOCALHOST:80", "null", "file://", "http://[::1]:1", "http://a:b@c", "http://%zz", "https://x.y:443/", "http://[fe80::1%25eth0]:80"} {
		f.Add(s)
	}
	set := NewOrigins([]string{"https://app.foxglove.dev", "http://127.0.0.1:3000"})
	f.Fuzz(func(t *testing.T, origin string) {
		n, err := NormalizeOrigin(origin)
		if err != nil {
			if set.Has(origin) {
				t.Fatalf("%q refused by NormalizeOrigin but allowed", origin)
			}
			return
		}
		if again, err := NormalizeOrigin(n); err != nil || again != n {
			t.Fatalf("%q -> %q -> %q, %v: not idempotent", origin, n, again, err)
		}
		if set.Has(origin) != (n == "https://app.foxglove.dev" || n == "http://127.0.0.1:3000") {
			t.Fatalf("%q (normalized %q): Has = %v", origin, n, set.Has(origin))
		}
	})
}
