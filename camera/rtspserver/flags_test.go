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
