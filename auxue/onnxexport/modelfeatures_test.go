package onnxexport_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/didoedge/didoedge/auxue/onnxexport"
	"github.com/didoedge/didoedge/internal/onnxtest"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/onnx"
)

// TestResizeBilinearMatchesONNXRuntime: auxue.ResizeBilinear, the Go side
// of the model-feature resize, equals ONNX Runtime's Resize (linear,
// half_pixel) for upsampling, downsampling and mixed sizes, and in closed
// form reproduces a linear ramp at the interior sample points (half-pixel
// centres: output x samples the source at (x + 0.5) w/ow - 0.5).
func TestResizeBilinearMatchesONNXRuntime(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sz := range [][4]int{{6, 7, 12, 12}, {24, 80, 64, 64}, {10, 10, 3, 5}, {5, 9, 5, 9}} {
		h, w, oh, ow := sz[0], sz[1], sz[2], sz[3]
		b := onnx.NewBuilder("resize")
		x := b.Input("x", 1, 1, int64(h), int64(w))
		y := b.Op("Resize", []string{x, "", "", b.ConstInt64("sizes", []int64{4}, []int64{1, 1, int64(oh), int64(ow)})},
			onnx.StringAttr("mode", "linear"), onnx.StringAttr("coordinate_transformation_mode", "half_pixel"))
		b.Rename(y, "y")
		b.OutputShaped("y", 1, 1, int64(oh), int64(ow))
		e, err := onnxrt.NewEvaluator(b.Model().Marshal(), "", "x", []string{"y"})
		if err != nil {
			t.Fatal(err)
		}
		src := make([]float32, h*w)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
		}
		outs, _, err := e.Run([]int64{1, 1, int64(h), int64(w)}, src)
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, oh*ow)
		auxue.ResizeBilinear(src, h, w, got, oh, ow)
		if d := onnxtest.MaxRelDiff(got, outs[0]); d > 1e-6 {
			t.Fatalf("%v: max rel diff to ONNX Runtime %.3g", sz, d)
		}
		// A ramp v = 3x + 2y: the resize reads it at the mapped point,
		// clamped to the source.
		for i := range src {
			src[i] = float32(3*(i%w) + 2*(i/w))
		}
		auxue.ResizeBilinear(src, h, w, got, oh, ow)
		for yo := 0; yo < oh; yo++ {
			for xo := 0; xo < ow; xo++ {
				sx := min(max((float64(xo)+0.5)*float64(w)/float64(ow)-0.5, 0), float64(w-1))
				sy := min(max((float64(yo)+0.5)*float64(h)/float64(oh)-0.5, 0), float64(h-1))
				if want := 3*sx + 2*sy; math.Abs(float64(got[yo*ow+xo])-want) > 1e-4*(1+want) {
					t.Fatalf("%v ramp at (%d,%d): %v, want %v", sz, yo, xo, got[yo*ow+xo], want)
				}
			}
		}
	}
}

// TestExportAuxUEContractModelFeatures: an AuxUE whose contract reads one
// of the main model's feature tensors, exported and run by ONNX Runtime on
// (image, depth, model_features), matches the Go contract (FeaturesWith:
// projection, resize, normalization) followed by the Go AuxUE; the
// python3-onnx checker accepts the file. Cases: a narrow tensor at 1/8
// (upsampled to the grid, no projection) and a wide one (80 channels,
// projected to 16) at the grid's own size.
func TestExportAuxUEContractModelFeatures(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		name    string
		c, h, w int
		wantOut int
	}{
		{"12 channels at 1/8", 12, 5, 6, 12},
		{"80 channels at 1/4, projected", 80, 10, 12, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			H, W := 40, 48
			img, err := auxue.ImageFromPixels(false, 3, [3]int{0, 1, 2}, [3]float32{1, 1, 1}, [3]float32{})
			if err != nil {
				t.Fatal(err)
			}
			mf, err := auxue.NewModelFeatures("enc/relu_3", tc.c, tc.h, tc.w, 16, 7)
			if err != nil {
				t.Fatal(err)
			}
			if mf.Out != tc.wantOut || (mf.Projection != nil) != (tc.c > 16) {
				t.Fatalf("out %d projection %v, want %d", mf.Out, mf.Projection != nil, tc.wantOut)
			}
			mf.Mean, mf.Std = make([]float32, mf.Out), make([]float32, mf.Out)
			for i := range mf.Mean {
				mf.Mean[i], mf.Std[i] = float32(rng.NormFloat64()), float32(0.5+rng.Float64())
			}
			c := auxue.InputContract{Height: H, Width: W, Image: img, Factor: 4, Bands: 4, MaxDepth: 80, Relative: true, Row: true, Model: mf}
			gh, gw := c.Grid()
			if c.Channels() != 5+mf.Out {
				t.Fatalf("channels %d, want %d", c.Channels(), 5+mf.Out)
			}
			m, err := auxue.NewModel(auxue.Config{Form: auxue.FormDense, In: c.Channels(), EncoderWidth: 4, Hidden: 4,
				K: 6, Lambda: 0.01, GlobalContext: true, GlobalContextBands: 4, Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			om, err := onnxexport.ExportAuxUEContract(m, c)
			if err != nil {
				t.Fatal(err)
			}
			onnxtest.PythonCheck(t, onnxtest.WriteModel(t, om, "auxue.onnx"))
			e, err := onnxrt.NewEvaluatorInputs(om.Marshal(), "", []string{onnxexport.InputImage, onnxexport.InputDepth, onnxexport.InputModelFeatures},
				[]string{onnxexport.OutputScale, onnxexport.OutputEpistemic})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			image, depth, feat := make([]float32, 3*H*W), make([]float32, H*W), make([]float32, tc.c*tc.h*tc.w)
			for i := range image {
				image[i] = float32(rng.NormFloat64())
			}
			for i := range depth {
				depth[i] = float32(rng.Float64()*5 + 1)
			}
			for i := range feat {
				feat[i] = float32(rng.ExpFloat64())
			}
			feats := make([]float32, c.Channels()*gh*gw)
			var sc auxue.ContractScratch
			if err := c.FeaturesWith(image, depth, feat, feats, &sc); err != nil {
				t.Fatal(err)
			}
			if err := c.Features(image, depth, feats, &sc); err == nil {
				t.Fatal("Features without the feature tensor: no error")
			}
			x := nn.NewDense(1, c.Channels(), gh, gw)
			copy(nn.Data(x), feats)
			var pred auxue.Prediction
			if err := m.Predict(x, 0.9, &pred); err != nil {
				t.Fatal(err)
			}
			outs, _, err := e.RunInputs([][]int64{{1, 3, int64(H), int64(W)}, {1, 1, int64(H), int64(W)}, {1, int64(tc.c), int64(tc.h), int64(tc.w)}},
				[][]float32{image, depth, feat})
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range [][]float32{upCrop(t, pred.Scale, c), upCrop(t, pred.Epistemic, c)} {
				if d := onnxtest.MaxRelDiff(outs[k], want); d > 1e-4 {
					t.Fatalf("output %d: max rel diff %.3g", k, d)
				}
			}
		})
	}
}
