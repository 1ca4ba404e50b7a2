package infer

import (
	"strings"
	"testing"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// TestParseProviders: "cuda:required" marks the provider required; a
// provider after a required one is refused by the config's validation;
// an unknown name is refused; spaces and empty entries are ignored.
func TestParseProviders(t *testing.T) {
	c, err := onnxrt.ParseProviders("cuda:required", "/x/lib.so")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Providers) != 1 || c.Providers[0] != (onnxrt.ProviderConfig{Name: onnxrt.ProviderCUDA, Required: true}) || c.Library != "/x/lib.so" {
		t.Fatalf("config %+v", c)
	}
	c, err = onnxrt.ParseProviders("tensorrt, cuda,,cpu", "")
	if err != nil || len(c.Providers) != 3 || c.Providers[1].Required || c.Providers[2].Name != onnxrt.ProviderCPU {
		t.Fatalf("config %+v, %v", c, err)
	}
	for _, bad := range []struct{ list, want string }{
		{"cuda:required,cpu", "which is required"},
		{"rocm", `"rocm"`},
	} {
		if _, err := onnxrt.ParseProviders(bad.list, ""); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error with %q", bad.list, err, bad.want)
		}
	}
}

func TestSpecBeside(t *testing.T) {
	for _, tc := range []struct{ model, spec, want string }{
		{"models/depth.onnx", "", "models/depth.yaml"},
		{"models/depth.onnx", "other.yaml", "other.yaml"},
		{"m", "", "m.yaml"},
		{"", "", ""},
		{"", "s.yaml", "s.yaml"},
	} {
		if got := SpecBeside(tc.model, tc.spec); got != tc.want {
			t.Errorf("SpecBeside(%q, %q) = %q, want %q", tc.model, tc.spec, got, tc.want)
		}
	}
}
