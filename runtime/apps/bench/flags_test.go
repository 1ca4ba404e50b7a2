package bench

import (
	"context"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// TestInferenceFlags: no flag keeps the demo's inference (nil); the flags
// give a validated config; a bad list names --providers.
func TestInferenceFlags(t *testing.T) {
	if c, err := (&InferenceFlags{}).Config(); c != nil || err != nil {
		t.Fatalf("no flags: %+v, %v", c, err)
	}
	c, err := (&InferenceFlags{Providers: "cuda:required", Library: "/x/lib.so"}).Config()
	if err != nil || c.Library != "/x/lib.so" || len(c.Providers) != 1 || c.Providers[0] != (onnxrt.ProviderConfig{Name: onnxrt.ProviderCUDA, Required: true}) {
		t.Fatalf("config %+v, %v", c, err)
	}
	if c, err := (&InferenceFlags{Library: "/x/lib.so"}).Config(); err != nil || c.Library != "/x/lib.so" || len(c.Providers) != 0 {
		t.Fatalf("--library alone: %+v, %v", c, err)
	}
	if c, err := (&InferenceFlags{DeviceTensors: "on"}).Config(); err != nil || c.DeviceTensors != onnxrt.DeviceTensorsOn || len(c.Providers) != 0 {
		t.Fatalf("--device-tensors alone: %+v, %v", c, err)
	}
	if _, err := (&InferenceFlags{Providers: "rocm"}).Config(); err == nil || !strings.Contains(err.Error(), `--providers "rocm"`) {
		t.Fatalf("unknown provider: %v", err)
	}
}

// TestMulticamFlags: bad values are refused before any model is read,
// naming the flag; the child's command line parses back to the same
// flags with --child set.
func TestMulticamFlags(t *testing.T) {
	parse := func(args ...string) *MulticamFlags {
		var f MulticamFlags
		fs := flag.NewFlagSet("bench multicam", flag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--providers", "rocm"}, `--providers "rocm"`},
		{[]string{"--thread-pool", "mine"}, "--thread-pool: "},
		{[]string{"--device-tensors", "always"}, `--device-tensors: device_tensors: "always" is not one of auto, on, off`},
		{[]string{"--cameras", "1,0"}, `--cameras "1,0": "0" is not a camera count`},
		{[]string{"--cameras", "1,x"}, `"x" is not a camera count`},
	} {
		if _, err := parse(tc.args...).MulticamRun(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	f := parse("--models", "m", "--cameras", "2,4", "--duration", "1m30s", "--warmup", "2s", "--fps", "7.5", "--frames", "3",
		"--slices", "9", "--batch-size", "2", "--dynamic-batch", "--thread-pool", "session", "--thread-spinning",
		"--providers", "cuda,cpu", "--library", "/x/lib.so", "--device-tensors", "off")
	cmd := f.ChildCommand("/bin/didoedge")(context.Background(), 4)
	if cmd.Path != "/bin/didoedge" || !reflect.DeepEqual(cmd.Args[1:3], []string{"bench", "multicam"}) {
		t.Fatalf("child command %v", cmd.Args)
	}
	child := parse(cmd.Args[3:]...)
	if child.Child != 4 {
		t.Fatalf("child --child %d, want 4", child.Child)
	}
	child.Child = -1
	if *child != *f {
		t.Fatalf("child flags %+v, want %+v", *child, *f)
	}
	if f.Duration != 90*time.Second || f.FPS != 7.5 {
		t.Fatalf("flags %+v", *f)
	}
}

// copyLine gives the copies and their share of inference on the device
// path, and says that nothing is separate on the host path.
func TestCopyLine(t *testing.T) {
	if got, want := copyLine(500*time.Microsecond, 10*time.Millisecond), "host/device copies per frame (device-resident tensors): 500µs, 0.050 of inference (depth + AuxUE 10ms; goal <= 0.10)"; got != want {
		t.Errorf("device path: %q, want %q", got, want)
	}
	if got := copyLine(0, 10*time.Millisecond); !strings.Contains(got, "none separate") {
		t.Errorf("host path: %q", got)
	}
}
