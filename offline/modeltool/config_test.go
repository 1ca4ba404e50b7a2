package modeltool

import (
	"strings"
	"testing"
)

func TestParseInferenceConfig(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // error substring; empty: valid
		providers  int
	}{
		{"full", "inference:\n  providers:\n    - {name: tensorrt, fp16: true, engine_cache_dir: /tmp/trt}\n    - {name: cpu}\ncamera: {url: rtsp://x}\n", "", 2},
		{"empty providers mean cpu", "inference: {intra_op_threads: 2}\n", "", 0},
		{"unknown key inside inference", "inference:\n  providers:\n    - {name: cpu, fp61: true}\n", "line 3: field fp61 not found", 0},
		{"bad provider", "inference:\n  providers: [{name: vulkan}]\n", "inference.providers[0].name: \"vulkan\"", 0},
		{"fp16 on cuda", "inference:\n  providers: [{name: cuda, fp16: true}]\n", "inference.providers[0]: fp16", 0},
		{"no inference section", "camera: {url: rtsp://x}\n", "no inference section", 0},
		{"empty file", "", "empty file", 0},
		{"not a mapping", "- 1\n- 2\n", "cannot unmarshal", 0},
		{"negative threads", "inference: {intra_op_threads: -1}\n", "inference.intra_op_threads", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseInferenceConfig([]byte(tc.yaml), "dep.yaml")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(cfg.Providers) != tc.providers {
					t.Fatalf("%d providers, want %d", len(cfg.Providers), tc.providers)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "dep.yaml") {
				t.Fatalf("error %v, want one naming dep.yaml and containing %q", err, tc.want)
			}
		})
	}
}

func FuzzParseInferenceConfig(f *testing.F) {
	f.Add([]byte("inference:\n  providers:\n    - {name: tensorrt, fp16: true, engine_cache_dir: /tmp/trt}\n    - {name: cuda}\n    - {name: cpu}\n"))
	f.Add([]byte("inference: {library: /x.so, intra_op_threads: 3}\nmodels: {depth: {path: a}}\n"))
	f.Add([]byte("inference: [1, 2]\n"))
	f.Add([]byte("&a [*a]\n"))
	f.Add([]byte("inference:\n  providers: [{name: cpu}, {name: cpu}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseInferenceConfig(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
	})
}
