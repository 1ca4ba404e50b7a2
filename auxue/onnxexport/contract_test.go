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
)

// TestExportAuxUEContractParity: the AuxUE exported with its input
// contract, run by ONNX Runtime on a main model's image input and depth,
// matches the Go contract (Features) followed by the Go AuxUE (Predict,
// nn.Upsample, crop), for main models of every layout, channel order and
// scaling, metric and relative depth, and sizes that need edge padding.
// The image channels of the Go features are also checked against the
// ImageNet normalization of the pixels computed here (closed form).
func TestExportAuxUEContractParity(t *testing.T) {
	type pix struct {
		nhwc          bool
		channels      int
		order         [3]int
		gain, offset  [3]float32
		range255      bool
		mean, std     [3]float32
		relative, row bool
	}
	tests := []struct {
		name             string
		h, w, f, bands   int
		p                pix
		wantGrid         [2]int
		identityExpected bool
	}{
		{"reference NCHW ImageNet", 64, 96, 4, 4, pix{channels: 3, order: [3]int{0, 1, 2}, mean: auxue.ImageMean, std: auxue.ImageStd, row: true}, [2]int{16, 24}, true},
		{"MiDaS-like NCHW 0-255 relative, padded rows", 40, 40, 4, 4, pix{channels: 3, order: [3]int{0, 1, 2}, range255: true, std: [3]float32{1, 1, 1}, relative: true, row: true}, [2]int{12, 10}, false},
		{"NHWC BGR mean/std, padded rows and columns", 50, 70, 4, 2, pix{nhwc: true, channels: 3, order: [3]int{2, 1, 0}, mean: [3]float32{0.5, 0.4, 0.3}, std: [3]float32{0.2, 0.3, 0.25}}, [2]int{14, 18}, false},
		{"grey 0-1, factor 2", 30, 30, 2, 1, pix{channels: 1, std: [3]float32{1, 1, 1}, row: true}, [2]int{15, 15}, false},
		{"518x518 (a ViT patch multiple), padded to 4 bands", 518, 518, 4, 4, pix{channels: 3, order: [3]int{0, 1, 2}, mean: auxue.ImageMean, std: auxue.ImageStd, row: true}, [2]int{132, 130}, true},
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			pr := float32(1)
			if p.range255 {
				pr = 255
			}
			for c := 0; c < p.channels; c++ {
				p.gain[c] = pr / (255 * p.std[c])
				p.offset[c] = -p.mean[c] / p.std[c]
			}
			src, err := auxue.ImageFromPixels(p.nhwc, p.channels, p.order, p.gain, p.offset)
			if err != nil {
				t.Fatal(err)
			}
			if src.IsIdentity() != tc.identityExpected {
				t.Fatalf("identity %v, want %v (%+v)", src.IsIdentity(), tc.identityExpected, src)
			}
			c := auxue.InputContract{Height: tc.h, Width: tc.w, Image: src, Factor: tc.f, Bands: tc.bands,
				MaxDepth: 80, Relative: p.relative, Row: p.row}
			gh, gw := c.Grid()
			if [2]int{gh, gw} != tc.wantGrid {
				t.Fatalf("grid %dx%d, want %v", gh, gw, tc.wantGrid)
			}
			m, err := auxue.NewModel(auxue.Config{Form: auxue.FormDense, In: c.Channels(), EncoderWidth: 4, Hidden: 4,
				K: 6, Lambda: 0.01, GlobalContext: tc.bands > 0, GlobalContextBands: tc.bands, Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			om, err := onnxexport.ExportAuxUEContract(m, c)
			if err != nil {
				t.Fatal(err)
			}
			onnxtest.PythonCheck(t, onnxtest.WriteModel(t, om, "auxue.onnx"))
			e, err := onnxrt.NewEvaluatorInputs(om.Marshal(), "", []string{onnxexport.InputImage, onnxexport.InputDepth},
				[]string{onnxexport.OutputScale, onnxexport.OutputEpistemic, onnxexport.OutputAlpha})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			H, W, hw := tc.h, tc.w, tc.h*tc.w
			pixels := make([]uint8, 3*hw)
			image := make([]float32, p.channels*hw)
			depth := make([]float32, hw)
			feats := make([]float32, c.Channels()*gh*gw)
			var sc auxue.ContractScratch
			var pred auxue.Prediction
			for round := 0; round < 3; round++ {
				for i := range pixels {
					pixels[i] = uint8(rng.IntN(256))
				}
				for i := 0; i < hw; i++ {
					q := pixels[3*i : 3*i+3]
					for ch := 0; ch < p.channels; ch++ {
						v := float32(q[p.order[ch]])
						if p.channels == 1 {
							v = (float32(q[0]) + float32(q[1]) + float32(q[2])) / 3
						}
						x := v*p.gain[ch] + p.offset[ch]
						if p.nhwc {
							image[i*p.channels+ch] = x
						} else {
							image[ch*hw+i] = x
						}
					}
					depth[i] = float32(rng.Float64()*120 - 5)
					if p.relative {
						depth[i] = float32(rng.NormFloat64()*3 + 7)
					}
				}
				if err := c.Features(image, depth, feats, &sc); err != nil {
					t.Fatal(err)
				}
				checkImageChannels(t, c, p.channels, pixels, feats)
				x := nn.NewDense(1, c.Channels(), gh, gw)
				copy(nn.Data(x), feats)
				if err := m.Predict(x, 0.9, &pred); err != nil {
					t.Fatal(err)
				}
				ishape := []int64{1, int64(p.channels), int64(H), int64(W)}
				if p.nhwc {
					ishape = []int64{1, int64(H), int64(W), int64(p.channels)}
				}
				outs, shapes, err := e.RunInputs([][]int64{ishape, {1, 1, int64(H), int64(W)}}, [][]float32{image, depth})
				if err != nil {
					t.Fatal(err)
				}
				if len(outs[0]) != hw || len(outs[1]) != hw || shapes[2][1] != 6 || shapes[2][2] != int64(gh) || shapes[2][3] != int64(gw) {
					t.Fatalf("output shapes %v", shapes)
				}
				for k, want := range [][]float32{upCrop(t, pred.Scale, c), upCrop(t, pred.Epistemic, c)} {
					if d := onnxtest.MaxRelDiff(outs[k], want); d > 1e-4 {
						t.Fatalf("round %d output %d: max rel diff %.3g", round, k, d)
					}
				}
			}
		})
	}
}

// upCrop upsamples a grid map by the contract's factor (nn.Upsample, the
// graph's Resize) and crops it to the input size.
func upCrop(t *testing.T, grid []float32, c auxue.InputContract) []float32 {
	t.Helper()
	gh, gw := c.Grid()
	low := nn.NewDense(1, 1, gh, gw)
	copy(nn.Data(low), grid)
	full := low
	if c.Factor > 1 {
		var err error
		if full, err = (&nn.Upsample{Factor: c.Factor}).Forward(low, nn.Eval); err != nil {
			t.Fatal(err)
		}
	}
	src, fw := nn.Data(full), gw*c.Factor
	out := make([]float32, c.Height*c.Width)
	for y := 0; y < c.Height; y++ {
		copy(out[y*c.Width:(y+1)*c.Width], src[y*fw:y*fw+c.Width])
	}
	return out
}

// checkImageChannels recomputes the image channels of the features from
// the 8-bit pixels: block means (edges repeated) of (p/255 - mean)/std with
// ImageNet statistics; a grey input carries the pixels' channel mean.
func checkImageChannels(t *testing.T, c auxue.InputContract, channels int, pixels []uint8, feats []float32) {
	t.Helper()
	gh, gw := c.Grid()
	f := c.Factor
	for k := 0; k < 3; k++ {
		for v := 0; v < gh; v++ {
			for u := 0; u < gw; u++ {
				var s float64
				for dv := 0; dv < f; dv++ {
					for du := 0; du < f; du++ {
						y, x := min(v*f+dv, c.Height-1), min(u*f+du, c.Width-1)
						q := pixels[3*(y*c.Width+x):]
						p := float64(q[k])
						if channels == 1 {
							p = (float64(q[0]) + float64(q[1]) + float64(q[2])) / 3
						}
						s += (p/255 - float64(auxue.ImageMean[k])) / float64(auxue.ImageStd[k])
					}
				}
				want := s / float64(f*f)
				if got := float64(feats[(k*gh+v)*gw+u]); math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
					t.Fatalf("image channel %d block (%d,%d): %v, want %v", k, v, u, got, want)
				}
			}
		}
	}
}
