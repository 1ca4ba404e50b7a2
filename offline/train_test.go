package offline

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/pkg/nn/gradcheck"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// logitFor returns z with MaxDepth*sigmoid(z) = d.
func logitFor(d, maxDepth float64) float32 { return float32(-math.Log(maxDepth/d - 1)) }

// TestAuxTrainBadOutliers: outlier settings are checked before any frame
// is rendered or run.
func TestAuxTrainBadOutliers(t *testing.T) {
	for _, c := range []AuxTrainConfig{
		{AuxOptim: AuxOptim{Outliers: 0.25}},
		{AuxOptim: AuxOptim{Outliers: 1, OutlierKinds: []auxue.OutlierKind{auxue.OutlierFlip}}},
		{AuxOptim: AuxOptim{Outliers: -0.1}},
	} {
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
		l, n, err := depthtrain.SILog{Lambda: tc.lambda, MaxDepth: 80}.LossGrad(z, gt, grad)
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
	loss := depthtrain.SILog{Lambda: 0.85, MaxDepth: 80}
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
// that the losses fall, and runs the exported models in ONNX Runtime (the
// runtime's infer.Models) against the Go forward passes.
func TestTrainSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two networks")
	}
	ctx := context.Background()
	const W, H = 128, 64
	cfg := depthtrain.TrainConfig{Width: W, Height: H, CropWidth: 64, Steps: 40, Batch: 2, Drives: 3, FramesPerDrive: 20,
		ValFrames: 1, ValDrives: 1, ValEvery: 1000, LR: 2e-3, Seed: 3}
	net, st, err := depthtrain.Train(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !(st.LastLoss < st.FirstLoss) {
		t.Fatalf("depth loss did not fall: first %v last %v", st.FirstLoss, st.LastLoss)
	}
	dir := t.TempDir()
	model, spec, err := WriteDepthArtifacts(net, dir, "depth", W)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ReadSpec(spec, infer.KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	if want := DepthSpec(net, W); !reflect.DeepEqual(ds, want) {
		t.Fatalf("depth.yaml reads back as %+v, want %+v", ds, want)
	}
	// Parity: ONNX Runtime through runtime/infer against the Go forward pass.
	src, err := depthtrain.NewSimSource(99, 1, 5, W, H)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := src.Render(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	dm, err := infer.OpenModels(ctx, infer.ModelsConfig{Depth: model, DepthSpec: ds}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := dm.RunDepth(ctx, fr.RGB, W, H)
	if err != nil {
		t.Fatal(err)
	}
	x := nn.NewDense(1, 3, H, W)
	depthtrain.NormalizeRGB(fr.RGB, W, H, 0, W, false, nn.Data(x))
	for i, v := range nn.Data(x) {
		if math.Abs(float64(v-dp.Image[i])) > 1e-5 {
			t.Fatalf("normalized input %d: Go %v, runtime %v", i, v, dp.Image[i])
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
		worst = math.Max(worst, math.Abs(float64(depthGo[i]-dp.Depth[i]))/float64(depthGo[i]))
	}
	if worst > 1e-4 {
		t.Fatalf("depth parity: worst relative difference %v", worst)
	}
	img, depthORT := append([]float32(nil), dp.Image...), append([]float32(nil), dp.Depth...)
	dm.Close()

	acfg := AuxTrainConfig{
		AuxDepthModel: AuxDepthModel{DepthModel: model, DepthSpec: spec},
		AuxData:       AuxData{Width: W, Height: H, Drives: 3, FramesPerDrive: 20, Frames: 6, ValFrames: 2, ValDrives: 1},
		AuxHeads:      AuxHeads{K: 8, UnlabeledKL: 0.1, GlobalContext: true, GlobalContextBands: 4},
		AuxOptim:      AuxOptim{Epochs: 4, Batch: 2, LR: 2e-3},
		Seed:          3,
	}
	aux, ast, err := AuxTrain(ctx, acfg)
	if err != nil {
		t.Fatal(err)
	}
	if !(ast.LastLoss < ast.FirstLoss) {
		t.Fatalf("auxue loss did not fall: first %v last %v", ast.FirstLoss, ast.LastLoss)
	}
	if len(ast.Epochs) != 4 || ast.ValFrames != 2 || math.IsNaN(float64(ast.Epochs[3].AUSERMSE)) || math.IsNaN(float64(ast.Epochs[3].SkyAUC)) || math.IsNaN(float64(ast.Epochs[3].NoGTAUC)) {
		t.Fatalf("validation reports %+v (%d validation frames)", ast.Epochs, ast.ValFrames)
	}
	// The K/S quantiles calibration compares its data with (CheckStranger):
	// ordered, and inside K/S's range (0, 1].
	if ks := ast.Epochs[3].KS; !(ks[0] > 0 && ks[0] <= ks[1] && ks[1] <= ks[2] && ks[2] <= 1) {
		t.Fatalf("validation K/S quantiles %v", ks)
	}
	if ast.Contract.Factor != 4 || !ast.Contract.Row || !ast.Contract.Image.IsIdentity() || ast.Throughput.Cache <= 0 || ast.Throughput.Train <= 0 {
		t.Fatalf("contract %+v, cache %v fps, train %v fps", ast.Contract, ast.Throughput.Cache, ast.Throughput.Train)
	}
	// The reference recipe also swaps batch items for layout outliers; their
	// blocks have no ground truth, so the epoch means (divided by the labeled
	// count) are not comparable across epochs: the run must only stay finite.
	ocfg := acfg
	ocfg.Epochs, ocfg.Outliers, ocfg.OutlierKinds = 2, 0.5, []auxue.OutlierKind{auxue.OutlierFlip, auxue.OutlierTiles}
	if _, ost, err := AuxTrain(ctx, ocfg); err != nil || math.IsNaN(float64(ost.LastLoss)) || math.IsInf(float64(ost.LastLoss), 0) {
		t.Fatalf("auxue training with layout outliers: %v (last loss %v)", err, ost.LastLoss)
	}
	auxPath, auxSpecPath, err := WriteAuxArtifacts(aux, ast.Contract.InputContract, ds, infer.AuxUEInfo{DepthModelSHA256: ast.DepthSHA256}, dir, "auxue")
	if err != nil {
		t.Fatal(err)
	}
	checkONNX(t, model, auxPath)
	pair, err := OpenModelPair(ctx, model, spec, auxPath, auxSpecPath, onnxrt.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pair.Close()
	maps, err := pair.Infer(ctx, fr.RGB, W, H)
	if err != nil {
		t.Fatal(err)
	}
	// Go side: the contract's features, the AuxUE on the grid, upsampled
	// by nn.Upsample (the graph's Resize), must match ONNX Runtime.
	c := ast.Contract
	gh, gw := c.Grid()
	feats := nn.NewDense(1, c.Channels(), gh, gw)
	var sc auxue.ContractScratch
	if err := c.Features(img, depthORT, nn.Data(feats), &sc); err != nil {
		t.Fatal(err)
	}
	var pred auxue.Prediction
	if err := aux.Predict(feats, 0.9, &pred); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name     string
		go2, ort []float32
	}{{"scale", pred.Scale, maps.Scale}, {"epistemic", pred.Epistemic, maps.Epistemic}} {
		low := nn.NewDense(1, 1, gh, gw)
		copy(nn.Data(low), m.go2)
		full, err := (&nn.Upsample{Factor: c.Factor}).Forward(low, nn.Eval)
		if err != nil {
			t.Fatal(err)
		}
		fd := nn.Data(full)
		for y := 0; y < H; y++ {
			for x := 0; x < W; x++ {
				v, o := fd[y*gw*c.Factor+x], m.ort[y*W+x]
				if !(o > 0) || math.Abs(float64(v-o)) > 1e-4*math.Abs(float64(v))+1e-6 {
					t.Fatalf("%s pixel (%d,%d): Go %v, ONNX Runtime %v", m.name, x, y, v, o)
				}
			}
		}
	}
}

// TestAuxTrainCacheAndResume: a second run with the same cache directory
// reuses every cached frame and trains the same weights; a run stopped
// after one epoch and resumed from its checkpoint ends with the weights of
// an uninterrupted run.
func TestAuxTrainCacheAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("trains AuxUEs")
	}
	ctx := context.Background()
	const W, H = 64, 32
	net, err := depthnet.New(depthnet.Config{Height: H, MaxDepth: 80, Width: 1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model, spec, err := WriteDepthArtifacts(net, dir, "depth", W)
	if err != nil {
		t.Fatal(err)
	}
	base := AuxTrainConfig{
		AuxDepthModel: AuxDepthModel{DepthModel: model, DepthSpec: spec},
		AuxData:       AuxData{Width: W, Height: H, Drives: 2, FramesPerDrive: 10, Frames: 4, ValFrames: 1, ValDrives: 1},
		AuxHeads:      AuxHeads{K: 4},
		AuxOptim:      AuxOptim{Epochs: 2, Batch: 2, Outliers: 0.5, OutlierKinds: []auxue.OutlierKind{auxue.OutlierFlip, auxue.OutlierTiles}},
		Seed:          4,
		CacheDir:      filepath.Join(dir, "cache"),
	}
	weights := func(m *auxue.Model) []float32 {
		var out []float32
		for _, p := range m.Params() {
			out = append(out, nn.Data(p.Value)...)
		}
		return out
	}
	m1, st1, err := AuxTrain(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Cache.Reused != 0 || st1.Cache.Frames != 4 || float64(st1.Cache.Bytes) != 5*st1.Cache.BytesPer100/100 {
		t.Fatalf("first run cache %+v", st1.Cache)
	}
	m2, st2, err := AuxTrain(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Cache.Reused != 4 || st2.Cache.ValReused != 1 || st2.Phases.Depth != 0 {
		t.Fatalf("second run did not reuse the cache: %+v, depth model time %v", st2.Cache, st2.Phases.Depth)
	}
	if !reflect.DeepEqual(weights(m1), weights(m2)) {
		t.Fatal("the cached run trained other weights")
	}
	// Stop the run after its first epoch's checkpoint.
	ck := filepath.Join(dir, "auxue.ckpt")
	stopped, cancel := context.WithCancel(ctx)
	defer cancel()
	half := base
	half.Checkpoint = ck
	half.Log = slog.New(cancelAfterEpoch{cancel})
	if _, _, err := AuxTrain(stopped, half); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	resumed := base
	resumed.Checkpoint, resumed.Resume = ck, true
	m3, st3, err := AuxTrain(ctx, resumed)
	if err != nil {
		t.Fatal(err)
	}
	if st3.ResumedFrom != 1 || len(st3.Epochs) != 1 {
		t.Fatalf("resumed from %d, ran %d epochs", st3.ResumedFrom, len(st3.Epochs))
	}
	if !reflect.DeepEqual(weights(m1), weights(m3)) {
		t.Fatal("the resumed run ended with other weights than the uninterrupted one")
	}
	wrong := resumed
	wrong.Seed = 9
	if _, _, err := AuxTrain(ctx, wrong); err == nil || !strings.Contains(err.Error(), "seed") {
		t.Fatalf("resume with another seed: %v", err)
	}
}

// cancelAfterEpoch is a log handler that cancels a context when the
// trainer logs its first epoch (after the epoch's checkpoint is written,
// the next step sees the cancellation).
type cancelAfterEpoch struct{ cancel context.CancelFunc }

func (h cancelAfterEpoch) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelAfterEpoch) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h cancelAfterEpoch) WithGroup(string) slog.Handler            { return h }
func (h cancelAfterEpoch) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "epoch" && a.Value.Int64() == 1 && r.Message == "train auxue" {
			h.cancel()
		}
		return true
	})
	return nil
}

// TestTrainDeterministic: the same seed gives bitwise the same weights
// (rendering is a pure function of seed and index; Conv2d splits work in
// fixed chunks per worker, so sums keep their order at a given GOMAXPROCS).
func TestTrainDeterministic(t *testing.T) {
	cfg := depthtrain.TrainConfig{Width: 64, Height: 32, CropWidth: 32, Steps: 5, Batch: 2, Drives: 2, FramesPerDrive: 5,
		ValFrames: 1, ValDrives: 1, ValEvery: 1000, Seed: 11}
	a, _, err := depthtrain.Train(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := depthtrain.Train(context.Background(), cfg)
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
