package rtspserver

import (
	"flag"
	"strings"
	"testing"
)

// TestSimFlagsConfig: the flags make the simulated world's server (UDP
// ports from --udp-port on --addr's host); bad values name their flag.
func TestSimFlagsConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--size", "64"}, "sim serve: --size: "},
		{[]string{"--world", "moon"}, "sim serve: "},
		{[]string{"--camera", "fisheye"}, "sim serve: --camera: "},
		{[]string{"--udp-port", "8001"}, "--udp-port 8001 must be even"},
		{[]string{"--udp-port", "-2"}, "--udp-port -2"},
		{[]string{"--udp-port", "65536"}, "--udp-port 65536"},
		{[]string{"--addr", "nohost", "--udp-port", "8000"}, `--addr "nohost"`},
	} {
		var f SimFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Config(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	var f SimFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f.AddFlags(fs)
	if err := fs.Parse([]string{"--addr", "127.0.0.1:9554", "--udp-port", "8000", "--size", "64x96", "--fps", "5"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config(nil)
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Generated["sim"]
	if cfg.Addr != "127.0.0.1:9554" || cfg.UDPRTPAddr != "127.0.0.1:8000" || cfg.UDPRTCPAddr != "127.0.0.1:8001" || g.Source == nil ||
		g.FPS != 5 || g.Codec != "mjpeg" || g.Quality != 85 {
		t.Fatalf("config %+v", cfg)
	}
}

// TestSimFlagsCamera: --camera selects the simulated camera, and without
// --size the frames have that camera's default size.
func TestSimFlagsCamera(t *testing.T) {
	for _, tc := range []struct {
		args []string
		w, h int
	}{
		{nil, 640, 192},
		{[]string{"--camera", "newcam"}, 640, 360},
		{[]string{"--camera", "newcam", "--size", "192x640"}, 640, 192},
	} {
		var f SimFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.Config(nil)
		if err != nil {
			t.Fatal(err)
		}
		if w, h := cfg.Generated["sim"].Source.Size(); w != tc.w || h != tc.h {
			t.Errorf("%v: source %dx%d, want %dx%d", tc.args, w, h, tc.w, tc.h)
		}
	}
}
