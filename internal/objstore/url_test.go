package objstore

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in     string
		bucket string
		key    string
		err    string
	}{
		{in: "s3://drives", bucket: "drives"},
		{in: "s3://drives/", bucket: "drives"},
		{in: "s3://drives/fleet/2026-11/", bucket: "drives", key: "fleet/2026-11"},
		{in: "s3://drives/a/b.json", bucket: "drives", key: "a/b.json"},
		{in: "/data/drives", err: "want s3://"},
		{in: "s3://", err: "bucket"},
		{in: "s3://Drives/x", err: "bucket"},
		{in: "s3://drives//x", err: "empty"},
		{in: "s3://drives/a/../b", err: ".."},
	} {
		got, err := ParseURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.in) {
				t.Errorf("%q: error %v, want one naming the URL and %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.Bucket != tc.bucket || got.Key != tc.key {
			t.Errorf("%q: %+v %v, want bucket %q key %q", tc.in, got, err, tc.bucket, tc.key)
		}
	}
	l := Location{Bucket: "b", Key: "p"}
	if got := l.Join("x/y.png").String(); got != "s3://b/p/x/y.png" {
		t.Errorf("join: %s", got)
	}
	if got := (Location{Bucket: "b"}).Join("x").String(); got != "s3://b/x" {
		t.Errorf("join at the bucket: %s", got)
	}
}

// FuzzParseURL: no panic, and a parsed location spells a URL that parses
// back to itself.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://b/k", "s3://bucket-1/a/b/c/", "s3://x", "s3:///", "s3://a..b/c", "s3://b/%2e%2e/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseURL(s)
		if err != nil {
			return
		}
		back, err := ParseURL(l.String())
		if err != nil || back != l {
			t.Fatalf("%q -> %+v -> %q -> %+v %v", s, l, l.String(), back, err)
		}
	})
}

func TestConfigFromEnvRefuses(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvAccessKey: "AKIDONLY"}, "go together"},
		{map[string]string{EnvEndpoint: "ftp://x"}, "http"},
		{map[string]string{EnvEndpoint: "http://u:pw@127.0.0.1:9000"}, "not in the URL"},
		{map[string]string{EnvEndpoint: "http://127.0.0.1:9000/bucket"}, "no path"},
	} {
		_, err := ConfigFromEnv(func(k string) string { return tc.env[k] }, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("%v: error shows the password: %v", tc.env, err)
		}
	}
	c, err := ConfigFromEnv(func(string) string { return "" }, t.TempDir())
	if err != nil || !strings.Contains(c.CredSource, "anonymous") || c.Endpoint != defaultEndpoint {
		t.Errorf("empty environment: %+v %v", c, err)
	}
}
