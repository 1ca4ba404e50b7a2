package stream

import (
	"strings"
	"testing"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// TestRequiredProviderFailsStart (a CPU test: it asserts that CUDA cannot
// run here): a config that requires cuda fails at start with an error
// naming the key, instead of running on the CPU; the YAML key parses with
// the runtime's strict decoder.
func TestRequiredProviderFailsStart(t *testing.T) {
	if onnxrt.NVIDIAGPUPresent() {
		t.Skip("an NVIDIA GPU is present: this CPU test asserts that a required cuda cannot run")
	}
	_, err := newBatchedPipelineEdit(t, func(s string) string {
		return strings.Replace(s, "providers: [{name: cpu}]", "providers: [{name: cuda, required: true}]", 1)
	})
	if err == nil {
		t.Fatal("a config requiring cuda started on a machine without a GPU")
	}
	for _, want := range []string{"inference.providers[0].required", "cuda is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
