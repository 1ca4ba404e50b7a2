package testmodels_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/internal/yamlstrict"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// modelSection is a depth or auxue section of a runtime configuration.
type modelSection struct {
	Model string       `yaml:"model"`
	IO    infer.IOSpec `yaml:"io"`
}

// TestWriteReferenceRunsInONNXRuntime loads the written models in ONNX
// Runtime with the IO specs of RuntimeConfig (the depth one must equal the
// layout's depth.yaml), runs one frame each and checks the shapes and the
// AuxUE's closed-form bounds: epistemic = K/S with S = sum of K alphas
// >= 1 lies in (0, 1], alpha >= 1, and the Laplace scale is > 0.
func TestWriteReferenceRunsInONNXRuntime(t *testing.T) {
	files := testmodels.WriteReference(t, filepath.Join(t.TempDir(), "models"))
	for _, p := range []string{files.Depth, files.AuxUE, files.DepthIOSpec, files.AuxUEIOSpec, files.Manifest} {
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
	}
	var cfg struct {
		Inference onnxrt.Config `yaml:"inference"`
		Depth     modelSection  `yaml:"depth"`
		AuxUE     modelSection  `yaml:"auxue"`
	}
	if err := yamlstrict.Decode([]byte(testmodels.RuntimeConfig), &cfg); err != nil {
		t.Fatalf("RuntimeConfig: %v", err)
	}
	if cfg.Depth.Model != testmodels.DepthFile || cfg.AuxUE.Model != testmodels.AuxUEFile {
		t.Fatalf("RuntimeConfig names models %q and %q", cfg.Depth.Model, cfg.AuxUE.Model)
	}
	depthSpec, err := infer.ParseIOSpec(readFile(t, files.DepthIOSpec), files.DepthIOSpec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(depthSpec, cfg.Depth.IO) {
		t.Fatalf("depth.yaml %+v differs from RuntimeConfig's depth.io %+v", depthSpec, cfg.Depth.IO)
	}
	auxSpec, err := infer.ParseIOSpec(readFile(t, files.AuxUEIOSpec), files.AuxUEIOSpec)
	if err != nil {
		t.Fatal(err)
	}
	withoutAlpha := auxSpec
	withoutAlpha.Alpha = infer.TensorSpec{}
	if !reflect.DeepEqual(withoutAlpha, cfg.AuxUE.IO) {
		t.Fatalf("auxue.yaml %+v differs from RuntimeConfig's auxue.io %+v (alpha aside)", auxSpec, cfg.AuxUE.IO)
	}
	if err := infer.CheckPair(depthSpec, auxSpec, nil); err != nil {
		t.Fatal(err)
	}
	plane := []int64{1, 1, testmodels.Height, testmodels.Width}
	tests := []struct {
		name   string
		path   string
		spec   infer.IOSpec
		shapes [][]int64
		// bounds[i] is the closed interval output i lies in (nil: any finite value)
		bounds [][2]float32
	}{
		{"depth", files.Depth, depthSpec, [][]int64{plane}, nil},
		{"auxue", files.AuxUE, auxSpec, [][]int64{plane, plane, {1, 8, testmodels.Height / 4, testmodels.Width / 4}},
			// scale: softplus clipped at 1e-12; epistemic: K/S > 0; alpha: exp(z) + 1
			[][2]float32{{1e-12, math.MaxFloat32}, {math.SmallestNonzeroFloat32, 1}, {1, math.MaxFloat32}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sess, err := infer.NewSession(context.Background(), tc.path, tc.spec, cfg.Inference, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			in := sess.Input()
			for i := range in {
				in[i] = float32(i%17) / 17
			}
			if tc.spec.OwnsInputs() { // the depth in metres
				for i := range sess.InputAt(1) {
					sess.InputAt(1)[i] = 1 + float32(i%23)
				}
			}
			fr, err := sess.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !fr.Valid {
				t.Fatalf("non-finite outputs: %v", fr.NonFinite)
			}
			for i, want := range tc.shapes {
				if got := sess.OutputShape(i); !slices.Equal(got, want) {
					t.Fatalf("output %s shape %v, want %v", sess.OutputNames()[i], got, want)
				}
				if tc.bounds == nil {
					continue
				}
				lo, hi := tc.bounds[i][0], tc.bounds[i][1]
				for _, v := range sess.Output(i) {
					if v < lo || v > hi {
						t.Fatalf("output %s value %g outside [%g, %g]", sess.OutputNames()[i], v, lo, hi)
					}
				}
			}
		})
	}
}

// TestWriteIsSeeded: two calls write the same bytes, which is what lets
// tests assert fixed outcomes on these models.
func TestWriteIsSeeded(t *testing.T) {
	a, b := testmodels.Write(t, t.TempDir()), testmodels.Write(t, t.TempDir())
	if a.DepthIOSpec != "" || a.Manifest != "" {
		t.Fatalf("Write reports reference files %+v", a)
	}
	for _, name := range []string{testmodels.DepthFile, testmodels.AuxUEFile} {
		first := readFile(t, filepath.Join(filepath.Dir(a.Depth), name))
		second := readFile(t, filepath.Join(filepath.Dir(b.Depth), name))
		if len(first) == 0 || !bytes.Equal(first, second) {
			t.Fatalf("%s: %d and %d bytes differ between two writes", name, len(first), len(second))
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
