package offline

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/pkg/nn"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// featureNetScript builds, with Debian's python3-onnx (not the project's
// exporter), an encoder-decoder depth model of a foreign convention: input
// "pixel_values" (1,3,H,W) NCHW; four 3x3 convolutions of stride 2 and
// padding 1 (enc1..enc4: 8, 16, 24, 32 channels; each followed by Relu),
// then a decoder of nearest x2 upsamplings and 3x3 convolutions (dec3 at
// 1/8: 12 channels; dec2 at 1/4: 10 channels, Relu), a one-channel coarse
// head at 1/4 ("coarse", a multi-scale output's map, not a feature map),
// and the depth output "predicted_depth" (1,1,H,W) upsampled from it. The
// graph carries no value_info: the shapes are for ONNX Runtime to tell.
// With decoder == "none" the model has no decoder: its coarse head sits on
// enc4 (1/16) and the finest tensors at 1/4 to 1/8 are the encoder's.
const featureNetScript = `
import sys, onnx
import numpy as np
from onnx import helper, TensorProto, numpy_helper
H, W, out, decoder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = np.random.default_rng(3)
inits, nodes = [], []
def conv(x, cin, cout, name, stride):
    w = numpy_helper.from_array((rng.standard_normal((cout, cin, 3, 3)) * 0.2).astype(np.float32), name + "_w")
    inits.append(w)
    nodes.append(helper.make_node("Conv", [x, name + "_w"], [name], strides=[stride, stride], pads=[1, 1, 1, 1]))
    return name
def relu(x, name):
    nodes.append(helper.make_node("Relu", [x], [name]))
    return name
def up(x, name):
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), name + "_s"))
    nodes.append(helper.make_node("Resize", [x, "", name + "_s"], [name], mode="nearest"))
    return name
x = "pixel_values"
c = 3
for i, cout in enumerate([8, 16, 24, 32]):
    x = relu(conv(x, c, cout, "enc%d" % (i + 1), 2), "enc%d_relu" % (i + 1))
    c = cout
if decoder == "unet":
    x = relu(conv(up(x, "up3"), 32, 12, "dec3", 1), "dec3_relu")
    x = relu(conv(up(x, "up2"), 12, 10, "dec2", 1), "dec2_relu")
    head = conv(x, 10, 1, "coarse", 1)
    scale = 4
else:
    head = conv(x, 32, 1, "coarse", 1)
    scale = 16
inits.append(numpy_helper.from_array(np.array([1, 1, H, W], np.int64), "full_size"))
nodes.append(helper.make_node("Resize", [head, "", "", "full_size"], ["up_full"], mode="linear"))
nodes.append(helper.make_node("Sigmoid", ["up_full"], ["predicted_depth"]))
g = helper.make_graph(nodes, "featnet", [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3, H, W])],
    [helper.make_tensor_value_info("predicted_depth", TensorProto.FLOAT, [1, 1, H, W])], initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="python3-onnx test (featnet)")
m.ir_version = 8
onnx.checker.check_model(m, full_check=True)
onnx.save(m, out)
`

// writeFeatureNet builds the model of featureNetScript at h x w and writes
// its spec; it returns both paths.
func writeFeatureNet(t *testing.T, dir string, h, w int, decoder string) (model, spec string) {
	t.Helper()
	if _, err := os.Stat(testmodels.Python); err != nil {
		t.Fatalf("python3-onnx: %v (run scripts/deps.sh)", err)
	}
	model = filepath.Join(dir, "featnet-"+decoder+".onnx")
	if out, err := exec.Command(testmodels.Python, "-c", featureNetScript, strconv.Itoa(h), strconv.Itoa(w), model, decoder).CombinedOutput(); err != nil {
		t.Fatalf("build the model with python3-onnx: %v\n%s", err, out)
	}
	spec = filepath.Join(dir, "featnet-"+decoder+".yaml")
	text := "input: {name: pixel_values, height: " + strconv.Itoa(h) + ", width: " + strconv.Itoa(w) + ", pixel_range: 255}\n" +
		"depth: {name: predicted_depth, meaning: relative}\n"
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return model, spec
}

// TestChooseFeatureTensor: on foreign models built by python3-onnx, the
// automatic choice finds the tensor the rule names, with the shape the
// convolution arithmetic gives in closed form: a 3x3 convolution of stride
// 2 and padding 1 maps a side n to floor((n + 2 - 3)/2) + 1 = ceil(n/2), so
// the encoder's levels have sides ceil(n/2^k) and the decoder's nearest x2
// upsamplings double the 1/16 level back. With a decoder the finest
// eligible resolution is 1/4 and its last tensor is dec2_relu (10
// channels; the one-channel coarse head at 1/4 is not a feature map);
// without one, the finest is enc2_relu at 1/4 (16 channels). Sides that are
// not multiples of 16 (60 x 100) exercise the ceil: there the decoder's
// 1/4 level is 16 x 28 (twice ceil(n/16)), finer than the encoder's 15 x 25,
// and wins.
func TestChooseFeatureTensor(t *testing.T) {
	dir := t.TempDir()
	ceilDiv := func(n, d int) int { return (n + d - 1) / d }
	for _, tc := range []struct {
		h, w    int
		decoder string
		tensor  string
		c       int
		wantH   func(n int) int
	}{
		{64, 96, "unet", "dec2_relu", 10, func(n int) int { return 4 * ceilDiv(n, 16) }},
		{60, 100, "unet", "dec2_relu", 10, func(n int) int { return 4 * ceilDiv(n, 16) }},
		{64, 96, "none", "enc2_relu", 16, func(n int) int { return ceilDiv(n, 4) }},
		{60, 100, "none", "enc2_relu", 16, func(n int) int { return ceilDiv(n, 4) }},
	} {
		model, specPath := writeFeatureNet(t, dir, tc.h, tc.w, tc.decoder)
		spec, err := ReadSpec(specPath, infer.KindDepth)
		if err != nil {
			t.Fatal(err)
		}
		fc, ok, err := ChooseFeatureTensor(model, spec, "")
		if err != nil || !ok {
			t.Fatalf("%dx%d %s: ok %v, %v", tc.w, tc.h, tc.decoder, ok, err)
		}
		wantH, wantW := tc.wantH(tc.h), tc.wantH(tc.w)
		if fc.Tensor != tc.tensor || fc.Channels != tc.c || fc.Height != wantH || fc.Width != wantW || !fc.Auto {
			t.Fatalf("%dx%d %s: chose %+v, want %s (1,%d,%d,%d)", tc.w, tc.h, tc.decoder, fc, tc.tensor, tc.c, wantH, wantW)
		}
		if r := featureRatio(tc.h, tc.w, wantH, wantW); fc.Ratio != r || r < MinFeatureRatio || r > MaxFeatureRatio {
			t.Fatalf("ratio %v, want %v within [%v, %v]", fc.Ratio, r, MinFeatureRatio, MaxFeatureRatio)
		}
		// Candidates: every rank-4 node output computed from the input
		// but the graph output (unet: 8 encoder tensors, 6 decoder
		// tensors, coarse, up_full; none: 8, coarse, up_full); eligible: those at 1/4 or 1/8 with >= 8
		// channels (unet: enc2 and its Relu, enc3 and its Relu, up3,
		// dec3 and its Relu, up2, dec2 and its Relu; none: enc2, enc3
		// and their Relus).
		wantCand, wantElig := 16, 10
		if tc.decoder == "none" {
			wantCand, wantElig = 10, 4
		}
		if fc.Candidates != wantCand || fc.Eligible != wantElig {
			t.Fatalf("%dx%d %s: %d candidates, %d eligible; want %d and %d", tc.w, tc.h, tc.decoder, fc.Candidates, fc.Eligible, wantCand, wantElig)
		}
		named, err := NamedFeatureTensor(model, spec, "", "enc3_relu")
		if err != nil || named.Channels != 24 || named.Height != ceilDiv(tc.h, 8) || named.Width != ceilDiv(tc.w, 8) || named.Auto {
			t.Fatalf("named enc3_relu: %+v, %v", named, err)
		}
		if _, err := NamedFeatureTensor(model, spec, "", "no_such_tensor"); err == nil {
			t.Fatal("a tensor the graph lacks: no error")
		}
	}
}

// TestPickFeature: the rule on given shapes: finest eligible resolution,
// last in graph order there; too few channels, a batch other than 1, rank
// 3 and resolutions outside 1/4 to 1/8 are skipped.
func TestPickFeature(t *testing.T) {
	sh := func(name string, d ...int64) infer.TensorShape { return infer.TensorShape{Name: name, Shape: d} }
	H, W := 256, 256
	got, ok := pickFeature([]infer.TensorShape{
		sh("full", 1, 16, 256, 256), sh("half", 1, 16, 128, 128), sh("q_enc", 1, 16, 64, 64), sh("e_enc", 1, 32, 32, 32),
		sh("q_dec", 1, 24, 64, 64), sh("q_head", 1, 1, 64, 64), sh("q_batch2", 2, 16, 64, 64), sh("rank3", 1, 64, 64),
		sh("e_dec", 1, 32, 32, 32), sh("sixteenth", 1, 64, 16, 16),
	}, H, W)
	if !ok || got.Tensor != "q_dec" || got.Ratio != 4 || got.Eligible != 4 {
		t.Fatalf("picked %+v", got)
	}
	if got, ok := pickFeature([]infer.TensorShape{sh("e", 1, 32, 32, 32), sh("e2", 1, 8, 32, 32)}, H, W); !ok || got.Tensor != "e2" || got.Ratio != 8 {
		t.Fatalf("only 1/8: picked %+v", got)
	}
	if got, ok := pickFeature([]infer.TensorShape{sh("full", 1, 16, 256, 256), sh("sixteenth", 1, 64, 16, 16), sh("thin", 1, 4, 64, 64)}, H, W); ok {
		t.Fatalf("nothing eligible, picked %+v", got)
	}
}

// TestAutoEpochs: ceil(steps / (frames/batch)) within [MinAutoEpochs,
// MaxAutoEpochs] = [1, 100].
func TestAutoEpochs(t *testing.T) {
	for _, tc := range []struct{ frames, batch, steps, want int }{
		{80, 2, 2000, 50},   // the byo walkthrough's folder: 40 steps an epoch
		{81, 2, 2000, 50},   // 40 steps an epoch (the odd frame is left out)
		{70, 2, 2000, 58},   // 35 an epoch: ceil(57.1)
		{300, 2, 2000, 14},  // the simulated pool's 300 frames: ceil(13.3)
		{280, 2, 800, 6},    // 140 an epoch: ceil(5.7)
		{8, 2, 2000, 100},   // 4 an epoch: 500, capped
		{1, 2, 2000, 100},   // fewer frames than a batch: one step an epoch
		{300, 2, 2250, 15},  // the reference recipe's 2,250 steps
		{20000, 2, 2000, 1}, // a large folder: one epoch of 10,000 steps
		{160, 1, 800, 5},    // batch 1: 160 an epoch
		{100, 0, 100, 1},    // batch 0 counts as 1
		{40, 2, 10000, 100}, // at most the maximum
	} {
		if got := AutoEpochs(tc.frames, tc.batch, tc.steps); got != tc.want {
			t.Errorf("AutoEpochs(%d, %d, %d) = %d, want %d", tc.frames, tc.batch, tc.steps, got, tc.want)
		}
	}
}

// TestAuxTrainDefaultRecipeModelFeatures trains with the default recipe
// (DefaultAuxTrainConfig: the 4-band global context, outliers, lr 6e-3,
// epochs from the frames, the depth model's feature tensor chosen
// automatically) on tiny frames of an untrained reference network, end to
// end: the tensor chosen is the network's last at 1/4 of its 32x64 input
// (dec2's Relu, 24 channels at 8x16: the layer table of docs/training.md;
// projected to the default 8 channels),
// the epochs are AutoEpochs', the AuxUE's spec names the tensor, and the
// runtime (infer.Models, which exposes the tensor in memory and feeds it
// to the AuxUE) gives the Go AuxUE's maps on the contract's features
// computed from the exposed tensor; the depth model's file is untouched
// and the session reports its sha256.
func TestAuxTrainDefaultRecipeModelFeatures(t *testing.T) {
	if testing.Short() {
		t.Skip("trains an AuxUE")
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
	before, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultAuxTrainConfig()
	if cfg.ModelFeatures != FeaturesAuto || cfg.Epochs != 0 || cfg.Steps != DefaultAuxSteps || !cfg.GlobalContext || cfg.Outliers == 0 {
		t.Fatalf("default recipe %+v", cfg)
	}
	cfg.DepthModel, cfg.DepthSpec, cfg.Width, cfg.Height = model, spec, W, H
	cfg.Drives, cfg.FramesPerDrive, cfg.Frames, cfg.ValFrames, cfg.ValDrives = 2, 10, 8, 2, 1
	cfg.Steps = 40 // 4 steps an epoch: 10 epochs
	aux, st, err := AuxTrain(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, mf := st.Features, st.Contract.Model
	if f == nil || mf == nil || f.Tensor != "relu_8" || f.Shape != fmt.Sprintf("1x24x%dx%d", H/4, W/4) || f.Resolution != "1/4.00" ||
		f.Chosen != FeaturesAuto || f.Channels != auxue.DefaultModelFeatureChannels || !f.Projected {
		t.Fatalf("feature tensor %+v", f)
	}
	// 24 channels, projected to the default 8.
	if mf.Out != auxue.DefaultModelFeatureChannels || len(mf.Projection) != 8*24 || len(mf.Mean) != 8 || st.Contract.Channels() != 5+8 {
		t.Fatalf("contract model features %+v, channels %d", mf, st.Contract.Channels())
	}
	if st.EpochsRun != 10 || !st.EpochsAuto || len(st.Epochs) != 10 || st.Steps != 40 {
		t.Fatalf("epochs %d (auto %v), %d reports, %d steps; want 10 epochs of 4 steps", st.EpochsRun, st.EpochsAuto, len(st.Epochs), st.Steps)
	}
	for _, e := range st.Epochs {
		if math.IsNaN(float64(e.Laplace)) || math.IsNaN(float64(e.DIDO)) || math.IsNaN(float64(e.AUSERMSE)) {
			t.Fatalf("epoch %+v", e)
		}
	}
	ds, err := ReadSpec(spec, infer.KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	auxPath, auxSpecPath, err := WriteAuxArtifacts(aux, st.Contract.InputContract, ds, infer.AuxUEInfo{DepthModelSHA256: st.DepthSHA256}, dir, "auxue")
	if err != nil {
		t.Fatal(err)
	}
	checkONNX(t, auxPath)
	as, err := ReadSpec(auxSpecPath, infer.KindAuxUE)
	if err != nil {
		t.Fatal(err)
	}
	if got := as.ModelFeatures; got == nil || *got != (infer.ModelFeatureInput{Name: "model_features", Tensor: "relu_8", Channels: 24, Height: 8, Width: 16}) ||
		as.AuxUE.ModelFeatureChannels != 8 || as.AuxUE.ModelFeatureHeads != FeatureHeadsDIDO || aux.Config.AleatoricInputs != 5 {
		t.Fatalf("auxue.yaml model_features %+v, read by %q (the Laplace head on %d channels)", got, as.AuxUE.ModelFeatureHeads, aux.Config.AleatoricInputs)
	}
	pair, err := OpenModelPair(ctx, model, spec, auxPath, auxSpecPath, onnxrt.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pair.Close()
	if pair.DepthSession().SHA256() != st.DepthSHA256 {
		t.Fatalf("the session reports sha256 %s, the file is %s", pair.DepthSession().SHA256(), st.DepthSHA256)
	}
	src, err := depthtrain.NewSimSource(99, 1, 5, W, H)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := src.Render(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := pair.Infer(ctx, fr.RGB, W, H)
	if err != nil {
		t.Fatal(err)
	}
	dm, err := infer.OpenModels(ctx, infer.ModelsConfig{Depth: model, DepthSpec: ds, DepthTensors: []string{"relu_8"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	dp, err := dm.RunDepth(ctx, fr.RGB, W, H)
	if err != nil {
		t.Fatal(err)
	}
	if len(dp.Tensors) != 1 || len(dp.Tensors[0]) != 24*8*16 {
		t.Fatalf("exposed tensors %d", len(dp.Tensors))
	}
	c := st.Contract
	gh, gw := c.Grid()
	x := nn.NewDense(1, c.Channels(), gh, gw)
	var sc auxue.ContractScratch
	if err := c.FeaturesWith(dp.Image, dp.Depth, dp.Tensors[0], nn.Data(x), &sc); err != nil {
		t.Fatal(err)
	}
	var pred auxue.Prediction
	if err := aux.Predict(x, 0.9, &pred); err != nil {
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
	after, err := os.ReadFile(model)
	if err != nil || string(after) != string(before) {
		t.Fatalf("the depth model's file changed (%v)", err)
	}
}

// TestModelFeaturesConfidence: --model-features confidence reads the
// output the depth spec names as its confidence (a DA3-like head, "conf"
// (1,1,H,W), added by python3-onnx to a seeded depth net: not a tensor
// called confidence): one channel at the depth model's output size; a
// spec without a confidence output is refused, naming the spec.
func TestModelFeaturesConfidence(t *testing.T) {
	dir := t.TempDir()
	const W, H = 64, 32
	ref, refSpec := seededDepthModel(t, dir, "plain", 3, W, H)
	model, spec := filepath.Join(dir, "withconf.onnx"), filepath.Join(dir, "withconf.yaml")
	line := testmodels.AddConfidenceHead(t, ref, model, "da3")
	b, err := os.ReadFile(refSpec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, append(b, []byte("confidence: "+line+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := ReadSpec(spec, infer.KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	fc, ok, err := resolveFeatures(AuxDepthModel{DepthModel: model, DepthSpec: spec}, AuxInputs{ModelFeatures: FeaturesConfidence}, ds)
	if err != nil || !ok {
		t.Fatalf("resolve: ok %v, %v", ok, err)
	}
	if fc.Tensor != "conf" || fc.Channels != 1 || fc.Height != H || fc.Width != W || fc.Auto {
		t.Fatalf("resolved %+v, want the 1-channel %dx%d output conf", fc, H, W)
	}
	rs, err := ReadSpec(refSpec, infer.KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	_, ok, err = resolveFeatures(AuxDepthModel{DepthModel: ref, DepthSpec: refSpec}, AuxInputs{ModelFeatures: FeaturesConfidence}, rs)
	if ok || err == nil || !strings.Contains(err.Error(), refSpec) || !strings.Contains(err.Error(), "declares no confidence output") {
		t.Fatalf("a spec without confidence: ok %v, %v", ok, err)
	}
}
