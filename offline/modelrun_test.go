package offline

import (
	"context"
	"encoding/json"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// TestRunImagesEncodings: model run --images writes, at each image's size,
// the depth in KITTI's encoding (round(d*256)), b x 256 and K/S x 65535 as
// 16-bit PNGs that decode to the maps infer.Models gives for the same
// image, a panel of 2 x 2 tiles with legends, and a summary whose means
// are the maps' means. The models: the NHWC metric model python3-onnx
// builds around the reference graph, and an (untrained) AuxUE exported for
// it with its input contract.
func TestRunImagesEncodings(t *testing.T) {
	dir := t.TempDir()
	model, spec := testmodels.Foreign(t, "nhwc", filepath.Join("..", "models", "depth.onnx"), dir)
	ds, err := ReadSpec(spec, infer.KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	c, err := AuxContract(ds, 4, 4, 80, true)
	if err != nil {
		t.Fatal(err)
	}
	m, err := auxue.NewModel(AuxTrainConfig{AuxHeads: AuxHeads{GlobalContext: true, GlobalContextBands: 4}}.AuxModelConfig(c.Channels()))
	if err != nil {
		t.Fatal(err)
	}
	aux, auxSpec, err := WriteAuxArtifacts(m, c, ds, infer.AuxUEInfo{}, dir, "auxue")
	if err != nil {
		t.Fatal(err)
	}
	// Two images of another size than the model's 640x192.
	images := filepath.Join(dir, "images")
	src, err := depthtrain.NewSimSource(5, 1, 5, 320, 120)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a.png", "b.png"} {
		f, err := src.Render(0, i)
		if err != nil {
			t.Fatal(err)
		}
		writeTestPNG(t, filepath.Join(images, name), func(w *os.File) error { return dataset.EncodeRGBPNG(w, 320, 120, f.RGB) })
	}
	out := filepath.Join(dir, "run")
	sum, err := RunImages(context.Background(), ImageRunConfig{Images: images, Out: out, Depth: model, DepthSpec: spec, AuxUE: aux, AuxUESpec: auxSpec})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Images) != 2 || sum.Relative || sum.Input != "640x192" {
		t.Fatalf("summary %+v", sum)
	}
	pair, err := OpenModelPair(context.Background(), model, spec, aux, auxSpec, onnxrt.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pair.Close()
	rgb, w, h, err := ReadImageRGB8(filepath.Join(images, "b.png"))
	if err != nil {
		t.Fatal(err)
	}
	maps, err := pair.Infer(context.Background(), rgb, w, h)
	if err != nil {
		t.Fatal(err)
	}
	is := sum.Images[1]
	for _, f := range []struct {
		key  string
		v    []float32
		gain float64
	}{{"depth", maps.Depth, 256}, {"scale", maps.Scale, 256}, {"epistemic", maps.Epistemic, 65535}} {
		g := readGray16(t, is.Files[f.key])
		if g.Bounds().Dx() != 320 || g.Bounds().Dy() != 120 {
			t.Fatalf("%s is %v, want the image's 320x120", f.key, g.Bounds())
		}
		var mean float64
		for i, v := range f.v {
			want := math.Min(math.Round(float64(v)*f.gain), 65535)
			got := float64(uint16(g.Pix[2*i])<<8 | uint16(g.Pix[2*i+1]))
			if got != want {
				t.Fatalf("%s pixel %d: %v, want %v", f.key, i, got, want)
			}
			mean += float64(v)
		}
		mean /= float64(len(f.v))
		st := map[string]MapStats{"depth": is.Depth, "scale": is.Scale, "epistemic": is.Epistemic}[f.key]
		if math.Abs(st.Mean-mean) > 1e-6*math.Abs(mean) || st.Valid != len(f.v) || !(st.P05 <= st.P50 && st.P50 <= st.P95) {
			t.Fatalf("%s summary %+v, mean %v over %d pixels", f.key, st, mean, len(f.v))
		}
	}
	panel, err := os.Open(is.Files["panel"])
	if err != nil {
		t.Fatal(err)
	}
	defer panel.Close()
	cfg, err := png.DecodeConfig(panel)
	if err != nil || cfg.Width != 640 || cfg.Height != 2*(120+legendH) {
		t.Fatalf("panel %+v %v, want 640x%d", cfg, err, 2*(120+legendH))
	}
	var js struct {
		Images []struct {
			Depth map[string]any
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &js); err != nil || js.Images[0].Depth["p50"] == nil {
		t.Fatalf("summary.json: %v\n%s", err, b)
	}
	if _, err := RunImages(context.Background(), ImageRunConfig{Images: filepath.Join(dir, "none", "*.png"), Out: out}); err == nil {
		t.Fatal("no images accepted")
	}
}

func readGray16(t *testing.T, path string) *image.Gray16 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := img.(*image.Gray16)
	if !ok {
		t.Fatalf("%s is %T, want 16-bit grey", path, img)
	}
	return g
}
