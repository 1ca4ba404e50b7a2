package modeltool

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/runtime/infer"
)

func TestExportTestModelsIsDeterministicAndValid(t *testing.T) {
	cfg := TestModelConfig{Height: 16, Width: 32, Seed: 7}
	a, err := ExportTestModels(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ExportTestModels(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{a.Depth, b.Depth}, {a.AuxUE, b.AuxUE}} {
		x, err := os.ReadFile(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s: two exports with the same seed differ", filepath.Base(pair[0]))
		}
	}
	other, err := ExportTestModels(t.TempDir(), TestModelConfig{Height: 16, Width: 32, Seed: 8})
	if err != nil {
		t.Fatal(err)
	}
	if other.DepthSHA256 == a.DepthSHA256 || other.AuxUESHA256 == a.AuxUESHA256 {
		t.Error("a different seed gave the same weights")
	}
	if sha, err := fileSHA256(a.Depth); err != nil || sha != a.DepthSHA256 {
		t.Errorf("reported depth sha256 %s, file has %s (%v)", a.DepthSHA256, sha, err)
	}
	// Debian's python3-onnx is the independent judge of the files.
	for _, p := range []string{a.Depth, a.AuxUE} {
		out, err := exec.Command("/usr/bin/python3", "-c",
			"import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)", p).CombinedOutput()
		if err != nil {
			t.Errorf("onnx.checker rejected %s: %v\n%s", p, err, out)
		}
	}
}

func TestExportTestModelsRejectsBadSize(t *testing.T) {
	tests := []struct {
		name string
		cfg  TestModelConfig
	}{
		{"height not divisible by 4", TestModelConfig{Height: 18, Width: 32}},
		{"zero width", TestModelConfig{Height: 16}},
		{"negative height", TestModelConfig{Height: -4, Width: 32}},
		{"one bin", TestModelConfig{Height: 16, Width: 32, K: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ExportTestModels(t.TempDir(), tc.cfg); err == nil {
				t.Fatalf("ExportTestModels(%+v) succeeded", tc.cfg)
			}
		})
	}
}

func TestSyntheticFrame(t *testing.T) {
	const w, h = 48, 16
	a, b, c := make([]byte, 3*w*h), make([]byte, 3*w*h), make([]byte, 3*w*h)
	SyntheticFrame(a, w, h, 3, 0)
	SyntheticFrame(b, w, h, 3, 0)
	SyntheticFrame(c, w, h, 3, 1)
	if !bytes.Equal(a, b) {
		t.Fatal("the same seed and frame gave different bytes")
	}
	if bytes.Equal(a, c) {
		t.Fatal("frames 0 and 1 are identical")
	}
	// Red is a horizontal ramp 0..255 (plus noise within ±24) in frame 0,
	// green a vertical one: compare the first and last columns and rows.
	mean := func(ch int, pix func(i int) int, n int) float64 {
		s := 0
		for i := range n {
			s += int(a[3*pix(i)+ch])
		}
		return float64(s) / float64(n)
	}
	left := mean(0, func(y int) int { return y * w }, h)
	right := mean(0, func(y int) int { return y*w + w - 1 }, h)
	top := mean(1, func(x int) int { return x }, w)
	bottom := mean(1, func(x int) int { return (h-1)*w + x }, w)
	if left > 24 || right < 255-24 || top > 24 || bottom < 255-24 {
		t.Fatalf("gradients missing: red left %.1f right %.1f, green top %.1f bottom %.1f", left, right, top, bottom)
	}
}

// TestRunMatchesGoForward runs the smoke pipeline through ONNX Runtime and
// recomputes every map with the Go networks (pkg/nn forward, auxue
// read-outs) on the same synthetic frames: depth from TinyUNet on the
// normalized image, the AuxUE on that image plus the depth as a fourth
// channel. With an IO spec, its mean and std must be applied.
func TestRunMatchesGoForward(t *testing.T) {
	cfg := TestModelConfig{Height: 16, Width: 32, Seed: 5}
	dir := t.TempDir()
	models, err := ExportTestModels(filepath.Join(dir, "models"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	unet, aux, err := testNetworks(cfg.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	h, w := cfg.Height, cfg.Width
	tests := []struct {
		name      string
		spec      infer.IOSpec
		mean, std [3]float32
	}{
		{"default spec", infer.IOSpec{}, [3]float32{0, 0, 0}, [3]float32{1, 1, 1}},
		{"spec with normalization", infer.IOSpec{
			Input: infer.InputSpec{Name: DepthInput, Height: h, Width: w, Mean: []float32{0.485, 0.456, 0.406}, Std: []float32{0.229, 0.224, 0.225}},
			Depth: infer.OutputSpec{Name: DepthOutput, Meaning: infer.MeaningMetricDepth},
		}, [3]float32{0.485, 0.456, 0.406}, [3]float32{0.229, 0.224, 0.225}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const frames = 2
			out := filepath.Join(t.TempDir(), "run")
			sum, err := Run(context.Background(), RunConfig{
				DepthModel: models.Depth, AuxUEModel: models.AuxUE, Height: h, Width: w,
				Frames: frames, Seed: 11, OutDir: out, DepthSpec: tc.spec,
			})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Models[0].Provider != "cpu" || len(sum.Maps) != 3*frames {
				t.Fatalf("summary: provider %q, %d maps", sum.Models[0].Provider, len(sum.Maps))
			}
			read, err := ReadSummary(out)
			if err != nil {
				t.Fatal(err)
			}
			plane := h * w
			rgb := make([]byte, 3*plane)
			x := nn.NewDense(1, 3, h, w)
			feat := nn.NewDense(1, 4, h, w)
			var pred auxue.Prediction
			got := make([]float32, plane)
			for f := range frames {
				SyntheticFrame(rgb, w, h, 11, f)
				for i := range plane {
					for c := range 3 {
						nn.Data(x)[c*plane+i] = (float32(rgb[3*i+c])/255 - tc.mean[c]) / tc.std[c]
					}
				}
				depth, _, err := unet.Forward(x)
				if err != nil {
					t.Fatal(err)
				}
				copy(nn.Data(feat), nn.Data(x))
				copy(nn.Data(feat)[3*plane:], nn.Data(depth))
				if err := aux.Predict(tensor.New(tensor.WithShape(1, 4, h, w), tensor.WithBacking(nn.Data(feat))), 0.9, &pred); err != nil {
					t.Fatal(err)
				}
				for _, m := range []struct {
					name string
					want []float32
				}{{MapDepth, nn.Data(depth)}, {MapScale, pred.Scale}, {MapEpistemic, pred.Epistemic}} {
					if err := readFloat32(filepath.Join(out, read.file(f, m.name)), got); err != nil {
						t.Fatal(err)
					}
					var diff, scale float64
					for i, v := range m.want {
						diff = max(diff, math.Abs(float64(got[i])-float64(v)))
						scale = max(scale, math.Abs(float64(v)))
					}
					if f == 0 {
						t.Logf("%s: max|ORT-Go| %.2g, max|Go| %.3g", m.name, diff, scale)
					}
					if scale == 0 || diff > 1e-4*scale {
						t.Errorf("frame %d %s: max|ORT-Go| = %.3g with max|Go| = %.3g", f, m.name, diff, scale)
					}
				}
			}
		})
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	models, err := ExportTestModels(filepath.Join(dir, "models"), TestModelConfig{Height: 16, Width: 32})
	if err != nil {
		t.Fatal(err)
	}
	ok := RunConfig{DepthModel: models.Depth, AuxUEModel: models.AuxUE, Height: 16, Width: 32, Frames: 1, OutDir: filepath.Join(dir, "out")}
	tests := []struct {
		name   string
		change func(*RunConfig)
		want   string
	}{
		{"size does not match the model", func(c *RunConfig) { c.Height = 20 }, "does not match its io spec"},
		{"missing depth model", func(c *RunConfig) { c.DepthModel = filepath.Join(dir, "nope.onnx") }, "nope.onnx"},
		{"models swapped", func(c *RunConfig) { c.DepthModel, c.AuxUEModel = c.AuxUEModel, c.DepthModel }, "input: the model has no input \"image\""},
		{"no frames", func(c *RunConfig) { c.Frames = 0 }, "frames 0"},
		{"no output dir", func(c *RunConfig) { c.OutDir = "" }, "output directory"},
		{"spec size differs", func(c *RunConfig) {
			c.DepthSpec = infer.IOSpec{Input: infer.InputSpec{Name: DepthInput, Height: 32, Width: 32}, Depth: infer.OutputSpec{Name: DepthOutput}}
		}, "differs from the depth io spec's 32x32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.change(&c)
			_, err := Run(context.Background(), c)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Fatalf("Run error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
