package redact

import (
	"fmt"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		has      bool
	}{
		{"rtsp://cam.local:554/stream1", "rtsp://cam.local:554/stream1", false},
		{"rtsp://admin:s3cret@10.0.0.5:554/h264", "rtsp://***@10.0.0.5:554/h264", true},
		{"rtsp://admin@10.0.0.5/h264", "rtsp://***@10.0.0.5/h264", true},
		{"rtsp://a:p@ss@host/x?y=z@w", "rtsp://***@host/x?y=z@w", true},
		{"tcp://u:p@host:1883", "tcp://***@host:1883", true},
		{"rtsp://host/path@notuser", "rtsp://host/path@notuser", false},
		{"not a url", "not a url", false},
	} {
		if got := URL(tc.in); got != tc.want || HasUserInfo(tc.in) != tc.has {
			t.Errorf("URL(%q) = %q (has %v), want %q (%v)", tc.in, got, HasUserInfo(tc.in), tc.want, tc.has)
		}
	}
}

func TestScrub(t *testing.T) {
	got := Scrub("dial u:topsecret@x failed; password topsecret rejected", "rtsp://u:topsecret@x/")
	if strings.Contains(got, "topsecret") {
		t.Fatalf("scrubbed message keeps the password: %s", got)
	}
	if Scrub("nothing", "rtsp://host/") != "nothing" {
		t.Fatal("a message without credentials changed")
	}
}

func ExampleURL() {
	fmt.Println(URL("rtsp://admin:s3cret@10.0.0.5:554/h264"))
	// Output: rtsp://***@10.0.0.5:554/h264
}
