package offline

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/auxue/depthnet"
	"github.com/didoedge/didoedge/auxue/nn"
	"github.com/didoedge/didoedge/auxue/nn/gradcheck"
	"github.com/didoedge/didoedge/runtime/infer"
)

// logitFor returns z with MaxDepth*sigmoid(z) = d.
func logitFor(d, maxDepth float64) float32 { return float32(-math.Log(maxDepth/d - 1)) }

// TestAuxTrainBadOutliers: outlier settings are checked before any frame
// is rendered or run.
func TestAuxTrainBadOutliers(t *testing.T) {
	for _, c := range []AuxTrainConfig{{Outliers: 0.25}, {Outliers: 1, OutlierKinds: []auxue.OutlierKind{auxue.OutlierFlip}}, {Outliers: -0.1}} {
		_, _, err := AuxTrain(context.Background(), c)
		if err == nil || !strings.Contains(err.Error(), "outlier fraction") {
			t.Errorf("AuxTrain %+v: %v, want an outlier fraction error", c, err)
		}
	}
}

func TestSILogClosedForm(t *testing.T) {
	// pred = c*y everywhere: g = ln c on every pixel, so
	// L = sqrt(ln^2 c - lambda ln^2 c) = |ln c| sqrt(1 - lambda).
	for _, tc := range []struct{ c, lambda float64 }{{1.5, 0.85}, {0.5, 0.85}, {2, 0}, {1, 0.85}} {
		gt := []float32{2, 0, 5, 10, 0, 30}
		z := make([]float32, len(gt))
		for i, y := range gt {
			if y > 0 {
				z[i] = logitFor(tc.c*float64(y), 80)
			} else {
				z[i] = 3 // no ground truth: must not matter
			}
		}
		grad := make([]float32, len(z))
		l, n, err := SILog{Lambda: tc.lambda, MaxDepth: 80}.LossGrad(z, gt, grad)
		if err != nil {
			t.Fatal(err)
		}
		want := math.Abs(math.Log(tc.c)) * math.Sqrt(1-tc.lambda)
		if n != 4 || math.Abs(l-want) > 1e-5 {
			t.Errorf("c=%v lambda=%v: loss %v over %d pixels, want %v over 4", tc.c, tc.lambda, l, n, want)
		}
		if grad[1] != 0 || grad[4] != 0 {
			t.Errorf("gradient on pixels without ground truth: %v", grad)
		}
	}
}

func TestSILogGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	gt := make([]float32, 40)
	z := make([]float32, 40)
	for i := range gt {
		if i%3 != 0 {
			gt[i] = 1 + 60*rng.Float32()
		}
		z[i] = float32(rng.NormFloat64())
	}
	loss := SILog{Lambda: 0.85, MaxDepth: 80}
	grad := make([]float32, len(z))
	if _, _, err := loss.LossGrad(z, gt, grad); err != nil {
		t.Fatal(err)
	}
	scratch := make([]float32, len(z))
	num := gradcheck.NumericGrad(func() float64 {
		l, _, _ := loss.LossGrad(z, gt, scratch)
		return l
	}, z, 1e-2)
	if err := gradcheck.Check(grad, num, gradcheck.Tolerance{Rel: 1e-2, Abs: 1e-4}); err != nil {
		t.Fatal(err)
	}
}

// TestTrainSmoke trains both networks for a few steps on tiny frames, checks
// that the losses fall, and runs the exported models in ONNX Runtime against
// the Go forward passes.
func TestTrainSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two networks")
	}
	ctx := context.Background()
	const W, H = 128, 64
	cfg := TrainConfig{Width: W, Height: H, CropWidth: 64, Steps: 40, Batch: 2, Drives: 3, FramesPerDrive: 20,
		ValFrames: 1, ValDrives: 1, ValEvery: 1000, LR: 2e-3, Seed: 3}
	net, st, err := Train(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !(st.LastLoss < st.FirstLoss) {
		t.Fatalf("depth loss did not fall: first %v last %v", st.FirstLoss, st.LastLoss)
	}
	dir := t.TempDir()
	model, spec, err := net.WriteArtifacts(dir, "depth", W, depthnet.AuxOptions{Decoder: true, Coord: true, Factor: 4})
	if err != nil {
		t.Fatal(err)
	}

	// Parity: ONNX Runtime through runtime/infer against the Go forward pass.
	src, err := NewSimSource(99, 1, 5, W, H)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := src.Render(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := OpenDepthRunner(ctx, model, spec, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	img, depthORT, auxORT, err := runner.Predict(ctx, fr.RGB, W, H)
	if err != nil {
		t.Fatal(err)
	}
	x := nn.NewDense(1, 3, H, W)
	NormalizeRGB(fr.RGB, W, H, 0, W, false, nn.Data(x))
	for i, v := range nn.Data(x) {
		if math.Abs(float64(v-img[i])) > 1e-5 {
			t.Fatalf("normalized input %d: Go %v, runtime %v", i, v, img[i])
		}
	}
	z, err := net.Forward(x, nn.Eval)
	if err != nil {
		t.Fatal(err)
	}
	depthGo := make([]float32, W*H)
	net.Depth(nn.Data(z), depthGo)
	worst := 0.0
	for i := range depthGo {
		worst = math.Max(worst, math.Abs(float64(depthGo[i]-depthORT[i]))/float64(depthGo[i]))
	}
	if worst > 1e-4 {
		t.Fatalf("depth parity: worst relative difference %v", worst)
	}
	// The graph's pooled image and depth channels of aux_features.
	const f = 4
	opts := depthnet.AuxOptions{Decoder: true, Coord: true, Factor: f}
	pooled := make([]float32, 4*H*W/(f*f))
	auxue.AuxFeatures(img, depthORT, H, W, f, 80, pooled)
	if len(auxORT) != net.AuxChannels(opts)*H*W/(f*f) {
		t.Fatalf("aux_features has %d values, want %d", len(auxORT), net.AuxChannels(opts)*H*W/(f*f))
	}
	for i, v := range pooled {
		if math.Abs(float64(v-auxORT[i])) > 1e-5*(1+math.Abs(float64(v))) {
			t.Fatalf("aux_features %d: Go %v, ONNX Runtime %v", i, v, auxORT[i])
		}
	}
	auxCopy := append([]float32(nil), auxORT...)
	runner.Close()

	aux, ast, err := AuxTrain(ctx, AuxTrainConfig{DepthModel: model, DepthSpec: spec, Width: W, Height: H,
		Seed: 3, Drives: 3, FramesPerDrive: 20, Frames: 6, Epochs: 4, Batch: 2, LR: 2e-3, K: 8, UnlabeledKL: 0.1,
		GlobalContext: true, GlobalContextBands: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !(ast.LastLoss < ast.FirstLoss) {
		t.Fatalf("auxue loss did not fall: first %v last %v", ast.FirstLoss, ast.LastLoss)
	}
	// The reference recipe also swaps batch items for layout outliers; their
	// blocks have no ground truth, so the epoch means (divided by the labeled
	// count) are not comparable across epochs: the run must only stay finite.
	_, ost, err := AuxTrain(ctx, AuxTrainConfig{DepthModel: model, DepthSpec: spec, Width: W, Height: H,
		Seed: 3, Drives: 3, FramesPerDrive: 20, Frames: 6, Epochs: 2, Batch: 2, LR: 2e-3, K: 8, UnlabeledKL: 0.1,
		GlobalContext: true, GlobalContextBands: 4, Outliers: 0.5, OutlierKinds: []auxue.OutlierKind{auxue.OutlierFlip, auxue.OutlierTiles}})
	if err != nil || math.IsNaN(ost.LastLoss) || math.IsInf(ost.LastLoss, 0) {
		t.Fatalf("auxue training with layout outliers: %v (last loss %v)", err, ost.LastLoss)
	}
	if ast.Factor != f {
		t.Fatalf("auxue factor %d, want %d", ast.Factor, f)
	}
	auxPath, _, err := depthnet.WriteAuxArtifacts(aux, dir, "auxue", H, W, f, "depth.onnx")
	if err != nil {
		t.Fatal(err)
	}
	checkONNX(t, model, auxPath)
	ar, err := OpenAuxRunner(auxPath, "", W, H, net.AuxChannels(opts), H/f, W/f)
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	scale, epis, err := ar.Predict(auxCopy)
	if err != nil {
		t.Fatal(err)
	}
	if len(scale) != W*H || len(epis) != W*H {
		t.Fatalf("auxue outputs %d and %d values, want %d", len(scale), len(epis), W*H)
	}
	// Go side at half resolution, upsampled by nn.Upsample (equal to the
	// graph's Resize), must match ONNX Runtime pixel by pixel.
	feats := nn.NewDense(1, net.AuxChannels(opts), H/f, W/f)
	copy(nn.Data(feats), auxCopy)
	var pred auxue.Prediction
	if err := aux.Predict(feats, 0.9, &pred); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		go2, ort []float32
	}{{"scale", pred.Scale, scale}, {"epistemic", pred.Epistemic, epis}} {
		low := nn.NewDense(1, 1, H/f, W/f)
		copy(nn.Data(low), c.go2)
		full, err := (&nn.Upsample{Factor: f}).Forward(low, nn.Eval)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range nn.Data(full) {
			o := c.ort[i]
			if !(o > 0) || math.Abs(float64(v-o)) > 1e-4*math.Abs(float64(v))+1e-6 {
				t.Fatalf("%s pixel %d: Go %v, ONNX Runtime %v", c.name, i, v, o)
			}
		}
	}
}

// TestTrainDeterministic: the same seed gives bitwise the same weights
// (rendering is a pure function of seed and index; Conv2d splits work in
// fixed chunks per worker, so sums keep their order at a given GOMAXPROCS).
func TestTrainDeterministic(t *testing.T) {
	cfg := TrainConfig{Width: 64, Height: 32, CropWidth: 32, Steps: 5, Batch: 2, Drives: 2, FramesPerDrive: 5,
		ValFrames: 1, ValDrives: 1, ValEvery: 1000, Seed: 11}
	a, _, err := Train(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := Train(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range a.Params() {
		q := b.Params()[i]
		for j, v := range nn.Data(p.Value) {
			if v != nn.Data(q.Value)[j] {
				t.Fatalf("%s[%d]: %v vs %v", p.Name, j, v, nn.Data(q.Value)[j])
			}
		}
	}
}

func TestIOSpecParses(t *testing.T) {
	net, err := depthnet.New(depthnet.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "depth.yaml")
	if err := os.WriteFile(path, []byte(net.IOSpecYAML(640)), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := infer.ParseIOSpec([]byte(net.IOSpecYAML(640)), path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Input.Name != depthnet.InputName || s.Input.Width != 640 || s.Input.Height != 192 || s.Depth.Name != depthnet.OutputName || s.Input.Std[2] != depthnet.Std[2] {
		t.Fatalf("spec %+v", s)
	}
}

// checkONNX runs Debian's python3-onnx checker (full_check, with shape
// inference) on the exported files: an independent reading of the graphs.
func checkONNX(t *testing.T, paths ...string) {
	t.Helper()
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Fatalf("python3-onnx checker: %v (run scripts/deps.sh)", err)
	}
	for _, p := range paths {
		out, err := exec.Command(py, "-c", "import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)", p).CombinedOutput()
		if err != nil {
			t.Fatalf("onnx checker on %s: %v\n%s", p, err, out)
		}
	}
}
