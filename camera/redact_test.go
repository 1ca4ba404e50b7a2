package camera

import (
	"errors"
	"testing"
	"time"
)

func TestRedactURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"rtsp://cam.local:554/stream1", "rtsp://cam.local:554/stream1"},
		{"rtsp://admin:s3cret@10.0.0.5:554/h264", "rtsp://***@10.0.0.5:554/h264"},
		{"rtsp://admin@10.0.0.5/h264", "rtsp://***@10.0.0.5/h264"},
		{"rtsp://a:p@ss@host/x?y=z@w", "rtsp://***@host/x?y=z@w"},
		{"rtsp://u:p@host", "rtsp://***@host"},
		{"rtsp://host/path@notuser", "rtsp://host/path@notuser"},
		{"not a url", "not a url"},
	}
	for _, tc := range cases {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNewRTSPSourceErrorsHideCredentials(t *testing.T) {
	cases := []string{"http://u:topsecret@host/x", "rtsp://u:topsecret@host:port/x", "rtsp://u:topsecret@[::1/x"}
	for _, u := range cases {
		_, err := NewRTSPSource(RTSPConfig{URL: u})
		if err == nil {
			t.Errorf("%q accepted", RedactURL(u))
			continue
		}
		if msg := err.Error(); containsAny(msg, "topsecret") {
			t.Errorf("error leaks the password: %s", msg)
		}
	}
	if got := scrub(errors.New("dial u:topsecret@x and topsecret").Error(), "rtsp://u:topsecret@x/"); containsAny(got, "topsecret") {
		t.Errorf("scrub left the password: %s", got)
	}
}

func containsAny(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestBackoff(t *testing.T) {
	const lo, hi = 100 * time.Millisecond, time.Second
	cases := []struct {
		attempt  int
		u        float64
		min, max time.Duration
	}{
		{0, 0, 50 * time.Millisecond, 50 * time.Millisecond},
		{0, 0.999, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 0, 100 * time.Millisecond, 100 * time.Millisecond},
		{3, 0.5, 600 * time.Millisecond, 600 * time.Millisecond},
		{4, 0, 500 * time.Millisecond, 500 * time.Millisecond}, // 1.6 s capped to 1 s, half fixed
		{40, 0.999, 999 * time.Millisecond, time.Second},       // no overflow far out
		{1000, 0.999, 999 * time.Millisecond, time.Second},
	}
	for _, tc := range cases {
		got := Backoff(tc.attempt, lo, hi, tc.u)
		if got < tc.min || got > tc.max {
			t.Errorf("Backoff(%d, u=%v) = %v, want in [%v, %v]", tc.attempt, tc.u, got, tc.min, tc.max)
		}
	}
}
