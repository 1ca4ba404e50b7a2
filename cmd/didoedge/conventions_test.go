package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline"
	"github.com/didoedge/didoedge/offline/offlinetest"
)

// conventionRef is what a convention model's read-out must be on a frame:
// the known depth d of each pixel (testmodels.ConventionDepth), times the
// focal factor for the canonical-camera model, or the relative inverse
// depth A/d + B of the ViT-like one.
func conventionRef(kind string, s *dataset.Sample, fxInput float64) []float64 {
	out := make([]float64, s.Width*s.Height)
	for i := range out {
		d := testmodels.ConventionDepth(s.RGB[3*i], s.RGB[3*i+1], s.RGB[3*i+2])
		switch kind {
		case "canonical":
			d *= fxInput / testmodels.ConvFocalInput
		case "vit":
			d = testmodels.MiDaSA/d + testmodels.MiDaSB
		}
		out[i] = d
	}
	return out
}

// refAbsRel is AbsRel on the ground-truth pixels in (1e-3, 80] with the
// prediction clamped into [1e-3, 80], in float64; a relative read-out r is
// first aligned by least squares in inverse depth (s = cov(r, 1/y)/var(r),
// t = mean(1/y) - s mean(r), d = 1/max(s r + t, 1/80)): docs/models.md.
func refAbsRel(pred []float64, gt []float32, relative bool) float64 {
	if relative {
		var n, sr, sz float64
		for i, y := range gt {
			if y > 0 {
				sr, sz, n = sr+pred[i], sz+1/float64(y), n+1
			}
		}
		mr, mz := sr/n, sz/n
		var crz, crr float64
		for i, y := range gt {
			if y > 0 {
				crz += (pred[i] - mr) * (1/float64(y) - mz)
				crr += (pred[i] - mr) * (pred[i] - mr)
			}
		}
		s := crz / crr
		t := mz - s*mr
		al := make([]float64, len(pred))
		for i, r := range pred {
			al[i] = 1 / math.Max(s*r+t, 1.0/80)
		}
		pred = al
	}
	var sum float64
	var n int
	for i, y := range gt {
		if !(y > 1e-3 && y <= 80) {
			continue
		}
		d := math.Min(math.Max(pred[i], 1e-3), 80)
		sum += math.Abs(d-float64(y)) / float64(y)
		n++
	}
	return sum / float64(n)
}

// TestConventionsThroughCommands: every output convention of published
// depth networks (testmodels.Convention: negative disparity, sigmoid
// disparity, canonical-camera metric depth, multi-scale outputs, a uint8
// NHWC input, float16 tensors, a ViT with sides in multiples of 14),
// declared in its spec lines, through `model run --images` (the depth
// median of summary.json is the closed form's) and `eval-quick` (its
// AbsRel, aligned for the relative model, equals the reference computed
// here from the known depth and the ground truth). The canonical model
// reads the camera's fx: from --intrinsics in model run, from the data
// set's intrinsics in eval-quick.
func TestConventionsThroughCommands(t *testing.T) {
	dir := t.TempDir()
	for _, kind := range testmodels.Conventions {
		t.Run(kind, func(t *testing.T) {
			kd := filepath.Join(dir, kind)
			model, spec := testmodels.Convention(t, kind, kd)
			aux, auxSpec := offlinetest.AuxUE(t, spec, kd)
			w, h := testmodels.ConventionSize(kind)
			data := filepath.Join(kd, "data")
			cli(t, "sim", "render", "--world", "outdoor", "--frames", "3", "--drives", "1", "--size", fmt.Sprintf("%dx%d", h, w),
				"--seed", "21", "--workers", "1", "--out", data)
			set, err := dataset.Open(dataset.Source{Dir: data})
			if err != nil {
				t.Fatal(err)
			}
			items, err := set.Items(dataset.SplitAll)
			if err != nil {
				t.Fatal(err)
			}
			// model run: the camera's fx given so that it is ConvFocalInput
			// at the input (frames at the input's size).
			args := []string{"model", "run", "--images", filepath.Join(data, "*", "image_02", "data", "*.png"), "--depth", model, "--depth-spec", spec,
				"--auxue", aux, "--auxue-spec", auxSpec, "--out", filepath.Join(kd, "run")}
			if kind == "canonical" {
				args = append(args, "--intrinsics", fmt.Sprintf("%g,%g,%g,%g,%d,%d", testmodels.ConvFocalInput, testmodels.ConvFocalInput, float64(w-1)/2, float64(h-1)/2, w, h))
			}
			out := cli(t, args...)
			if kind == "canonical" && !strings.Contains(out, "canonical-camera depth x 0.05") {
				t.Errorf("model run does not print the intrinsics and the focal factor 50/1000:\n%s", out)
			}
			var sum offline.ImageRunSummary
			b, err := os.ReadFile(filepath.Join(kd, "run", "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatal(err)
			}
			var raw struct {
				Images []struct {
					Depth map[string]float64 `json:"depth"`
				} `json:"images"`
			}
			if err := json.Unmarshal(b, &raw); err != nil || len(raw.Images) != len(items) {
				t.Fatalf("summary.json: %d images for %d frames (%v)", len(raw.Images), len(items), err)
			}
			tol := 1e-4
			if kind == "half" {
				tol = 2e-3
			}
			var frames []*dataset.Sample
			for i, it := range items {
				s, err := set.Load(it)
				if err != nil {
					t.Fatal(err)
				}
				frames = append(frames, s)
				ref := conventionRef(kind, s, testmodels.ConvFocalInput)
				slices.Sort(ref)
				want, got := ref[len(ref)/2], raw.Images[i].Depth["p50"]
				if math.Abs(got-want) > tol*math.Abs(want) {
					t.Errorf("model run %s: depth p50 %v, want %v", it.Drive, got, want)
				}
			}
			if sum.Relative != (kind == "vit") {
				t.Errorf("summary relative %v", sum.Relative)
			}
			// eval-quick: AbsRel equals the reference's.
			out = cli(t, "eval-quick", "--depth", model, "--depth-spec", spec, "--auxue", aux, "--auxue-spec", auxSpec, "--data", data, "--split", "all", "--json")
			var ev map[string]any
			if err := json.Unmarshal([]byte(out), &ev); err != nil {
				t.Fatalf("eval-quick: %v\n%s", err, out)
			}
			var ref float64
			for _, s := range frames {
				// The data set's fx, scaled into the input (same size here).
				ref += refAbsRel(conventionRef(kind, s, s.Intrinsics.Fx), s.Sparse, kind == "vit")
			}
			ref /= float64(len(frames))
			got, _ := ev["absrel"].(float64)
			if math.Abs(got-ref) > tol*ref+1e-6 {
				t.Fatalf("eval-quick absrel %v, reference %v", got, ref)
			}
			t.Logf("%s: eval-quick absrel %.6f, reference %.6f (frames %v, fx %s)", kind, got, ref, ev["frames"], strconv.FormatFloat(frames[0].Intrinsics.Fx, 'g', 6, 64))
		})
	}
}
