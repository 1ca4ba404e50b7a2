package infer

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/didoedge/didoedge/auxue/onnxexport"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/pkg/onnx"
)

func TestDeviceTensorsConfig(t *testing.T) {
	for _, v := range []string{"", onnxrt.DeviceTensorsAuto, onnxrt.DeviceTensorsOn, onnxrt.DeviceTensorsOff} {
		if err := (onnxrt.Config{DeviceTensors: v}).Validate(); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	err := onnxrt.Config{DeviceTensors: "cuda"}.Validate()
	if err == nil || err.Error() != `device_tensors: "cuda" is not one of auto, on, off` {
		t.Fatalf("err %v, want it to name device_tensors and the values", err)
	}
}

// deviceKind is one model pair and setting of TestDeviceMatchesHost.
type deviceKind struct {
	name    string
	pair    modelPair
	batch   int  // BatchSize (dynamic copies above 1)
	views   int  // cameras (Share views) per InferBatch, 0 = Infer
	device  bool // the device path is expected (false: the host path stays)
	feature bool // a features-input AuxUE
}

func deviceKinds(t *testing.T) []deviceKind {
	pairs := modelPairs(t)
	test, ref := pairs[0], pairs[1]
	scaled := test
	scaled.name = "test models, depth scale 2"
	scaled.depthSpec.Depth.Scale = 2
	rel := test
	rel.name = "test models, relative"
	rel.depthSpec.Depth.Meaning = MeaningRelative
	rel.auxueSpec.DepthInput.Units = UnitsRelative
	rel.auxueSpec.Scale.Units = UnitsRelative
	dref := ref
	dref.depth, dref.aux = dynamicCopy(t, ref.depth), dynamicCopy(t, ref.aux)
	dtest := test
	dtest.depth, dtest.aux = dynamicCopy(t, test.depth), dynamicCopy(t, test.aux)
	return []deviceKind{
		{name: "test metric identity", pair: test, device: true},
		{name: "test metric scale 2 (read-out uploaded)", pair: scaled, device: true},
		{name: "test relative", pair: rel, device: true},
		{name: "reference", pair: ref, device: true},
		{name: "test batch 3 views", pair: dtest, batch: 3, views: 3, device: true},
		{name: "reference batch 3 views", pair: dref, batch: 3, views: 3, device: true},
		{name: "features input", pair: featuresPair(t), device: false, feature: true},
	}
}

// openKind opens the kind's models with inference.device_tensors mode.
func openKind(t *testing.T, k deviceKind, mode string) *Models {
	t.Helper()
	cfg := ModelsConfig{Depth: k.pair.depth, DepthSpec: k.pair.depthSpec, AuxUE: k.pair.aux, AuxUESpec: k.pair.auxueSpec,
		Inference: onnxrt.Config{IntraOpThreads: 1, DeviceTensors: mode}, BatchSize: k.batch}
	if k.feature {
		cfg.AuxInputs = []string{SourceImage, SourceDepth}
	}
	m, err := OpenModels(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// inferKind runs round r of frames through m (and its views) and returns
// copies of every view's maps (frame size and native) and the times.
func inferKind(t *testing.T, m *Models, views []*Models, k deviceKind, round int) ([][]float32, StageTimes) {
	t.Helper()
	ctx := context.Background()
	w, h := k.pair.depthSpec.Input.Width, k.pair.depthSpec.Input.Height
	var out [][]float32
	var tm StageTimes
	add := func(mp Maps) {
		out = append(out, clone(mp.Depth), clone(mp.Scale), clone(mp.Epistemic), clone(mp.Native.Depth), clone(mp.Native.Scale), clone(mp.Native.Epistemic))
	}
	if k.views == 0 {
		frames, ws, hs := batchFrames(round%3+1, w+round, h)
		f := len(frames) - 1
		mp, _, err := m.InferTimed(ctx, frames[f], ws[f], hs[f], &tm)
		if err != nil {
			t.Fatal(err)
		}
		add(mp)
		return out, tm
	}
	// batches of 1..views cameras, in turn
	n := round%k.views + 1
	frames, ws, hs := batchFrames(n, w+round, h)
	staged := make([]*Staged, n)
	for i := range n {
		staged[i] = m.NewStaged()
		if err := m.Stage(staged[i], frames[i], ws[i], hs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.InferBatch(ctx, views[:n], staged, &tm); err != nil {
		t.Fatal(err)
	}
	for _, v := range views[:n] {
		mp, _, err := v.Result()
		if err != nil {
			t.Fatal(err)
		}
		add(mp)
	}
	return out, tm
}

func kindViews(t *testing.T, m *Models, k deviceKind) []*Models {
	views := []*Models{m}
	for len(views) < k.views {
		v, err := m.Share()
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, v)
	}
	return views
}

// The device path over host memory ("Cpu", device_tensors: on) gives maps
// bit-identical to the host path: depth, Laplace scale and K/S, at the
// frame's size and native, for metric (identity read-out: the AuxUE reads
// the raw output; scale 2: the read-out is uploaded) and relative test
// models, the reference models, batches of 1 to 3 cameras through shared
// views, over several rounds of different frames. It reports copy time; a
// features-input AuxUE stays on the host path.
func TestDeviceMatchesHost(t *testing.T) {
	for _, k := range deviceKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			host, dev := openKind(t, k, onnxrt.DeviceTensorsOff), openKind(t, k, onnxrt.DeviceTensorsOn)
			if got := host.DeviceResident(); got != "" {
				t.Fatalf("device_tensors off: DeviceResident %q", got)
			}
			want := ""
			if k.device {
				want = "Cpu"
			}
			if got := dev.DeviceResident(); got != want {
				t.Fatalf("device_tensors on: DeviceResident %q, want %q", got, want)
			}
			hv, dv := kindViews(t, host, k), kindViews(t, dev, k)
			for r := range 4 {
				hm, ht := inferKind(t, host, hv, k, r)
				dm, dt := inferKind(t, dev, dv, k, r)
				if len(hm) != len(dm) {
					t.Fatalf("round %d: %d maps, host %d", r, len(dm), len(hm))
				}
				for i := range hm {
					if j := firstDiff(hm[i], dm[i]); j >= 0 {
						t.Fatalf("round %d map %d: value %d is %v on the device path, %v on the host path", r, i, j, dm[i][j], hm[i][j])
					}
				}
				if ht.Copy != 0 {
					t.Errorf("host path: Copy %v, want 0", ht.Copy)
				}
				if k.device && dt.Copy <= 0 {
					t.Errorf("device path: Copy %v, want > 0", dt.Copy)
				}
				if r == 3 {
					t.Logf("copies %v, depth %v, auxue %v (CPU memory)", dt.Copy, dt.Depth, dt.AuxUE)
				}
			}
		})
	}
}

// firstDiff is the first index where a and b differ bit for bit (-1: none).
func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// A run that fails on the device path goes through the fault policy:
// one failure is retried on the device binding (the frame succeeds, the
// path stays); a failure of the retry too rebuilds the session (the
// frame fails with a ModelFault), and the next frames run on the host
// path with maps equal to the host path's.
func TestDeviceFaultFallsBack(t *testing.T) {
	k := deviceKinds(t)[3] // reference models
	host, dev := openKind(t, k, onnxrt.DeviceTensorsOff), openKind(t, k, onnxrt.DeviceTensorsOn)
	frames, ws, hs := batchFrames(1, 640, 192)
	ctx := context.Background()
	want, err := host.Infer(ctx, frames[0], ws[0], hs[0])
	if err != nil {
		t.Fatal(err)
	}
	wantMaps := [][]float32{clone(want.Depth), clone(want.Scale), clone(want.Epistemic)}
	check := func(stage string, mp Maps) {
		for i, g := range [][]float32{mp.Depth, mp.Scale, mp.Epistemic} {
			if j := firstDiff(wantMaps[i], g); j >= 0 {
				t.Fatalf("%s: map %d differs from the host path at %d", stage, i, j)
			}
		}
	}
	dev.aux.injectRunFailures(1)
	mp, err := dev.Infer(ctx, frames[0], ws[0], hs[0])
	if err != nil {
		t.Fatalf("one injected failure: %v (the retry should succeed)", err)
	}
	check("after a retried fault", mp)
	if f := dev.aux.Faults(); f.RunFaults != 1 || f.Recovered != 1 || dev.DeviceResident() != "Cpu" {
		t.Fatalf("faults %+v, device %q: want one recovered fault on the device path", f, dev.DeviceResident())
	}
	api := dev.dev.api
	dev.depth.injectRunFailures(2)
	_, err = dev.Infer(ctx, frames[0], ws[0], hs[0])
	var mf *ModelFault
	if !errors.As(err, &mf) || mf.Kind != FaultRun || mf.Model != "depth" {
		t.Fatalf("two injected failures: err %v, want a depth ModelFault of kind run", err)
	}
	if f := dev.depth.Faults(); f.Rebuilds != 1 {
		t.Fatalf("faults %+v, want one rebuild", f)
	}
	mp, err = dev.Infer(ctx, frames[0], ws[0], hs[0])
	if err != nil {
		t.Fatalf("the frame after the rebuild: %v", err)
	}
	if got := dev.DeviceResident(); got != "" {
		t.Fatalf("after a rebuild: DeviceResident %q, want the host path", got)
	}
	if api == nil || !api.Closed() || dev.dev.api != nil {
		t.Fatalf("after the path turned off: device API %v, closed %v; want it closed and dropped", api, api != nil && api.Closed())
	}
	check("after the rebuild (host path)", mp)
}

// 1000 frames on the device path allocate nothing on the Go heap and
// create no ONNX Runtime object: the objects the device path holds stay
// at their count after the first frame, and Close releases every one.
func TestDeviceNoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("1000 frames")
	}
	k := deviceKinds(t)[0]
	m := openKind(t, k, onnxrt.DeviceTensorsOn)
	frames, ws, hs := batchFrames(1, 64, 32)
	ctx := context.Background()
	if _, err := m.Infer(ctx, frames[0], ws[0], hs[0]); err != nil {
		t.Fatal(err)
	}
	d, a := m.depth.dev, m.aux.dev
	live := d.live + a.live
	// depth: memory info, allocator, 1 input + 1 output tensors, 1 binding
	// with 2 views; AuxUE: memory info, allocator, 2 output tensors, 1
	// binding with 4 views (image and depth borrowed).
	if d.live != 7 || a.live != 9 {
		t.Fatalf("objects held: depth %d, auxue %d; want 7 and 9", d.live, a.live)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := m.Infer(ctx, frames[0], ws[0], hs[0]); err != nil {
			t.Fatal(err)
		}
	})
	runtime.GC()
	runtime.ReadMemStats(&after)
	if allocs != 0 {
		t.Errorf("%v Go allocations per frame, want 0", allocs)
	}
	if grow := int64(after.HeapAlloc) - int64(before.HeapAlloc); grow > 256<<10 {
		t.Errorf("Go heap grew by %d bytes over 1000 frames", grow)
	}
	if got := d.live + a.live; got != live {
		t.Errorf("ONNX Runtime objects held: %d after 1000 frames, %d after the first", got, live)
	}
	api := m.dev.api
	if api == nil || api.Closed() {
		t.Fatalf("device API %v before Close, want an open one", api)
	}
	m.Close()
	if d.live != 0 || a.live != 0 {
		t.Errorf("after Close: depth holds %d, auxue %d objects", d.live, a.live)
	}
	// The device API (with CUDA: the copies' stream) goes with the models.
	if !api.Closed() || m.dev.api != nil {
		t.Errorf("after Close: device API closed %v, still held %v", api.Closed(), m.dev.api != nil)
	}
}

// featuresPair is a depth model and a features-input AuxUE (image and
// depth concatenated on the host), as TestModelsLetterboxAndFeaturesInput
// builds them.
func featuresPair(t *testing.T) modelPair {
	const h, w = 16, 16
	u, err := onnx.NewTinyUNet(2, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	dm, err := u.Export([]int64{1, 3, h, w})
	if err != nil {
		t.Fatal(err)
	}
	am, err := auxue.NewModel(auxue.Config{Form: auxue.FormDense, In: 4, EncoderWidth: 2, Hidden: 2, K: 4, Lambda: 0.01, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ax, err := onnxexport.ExportAuxUE(am, []int64{1, 4, h, w})
	if err != nil {
		t.Fatal(err)
	}
	ds := IOSpec{Input: InputSpec{Name: "image", Height: h, Width: w, Mean: []float32{0.5, 0.5, 0.5}, Std: []float32{0.25, 0.25, 0.25}},
		Depth: OutputSpec{Name: "depth", Meaning: MeaningMetricDepth}}
	as := IOSpec{Kind: KindAuxUE, Input: InputSpec{Name: "features", Channels: 4, Height: h, Width: w},
		Scale: TensorSpec{Name: onnxexport.OutputScale}, Epistemic: TensorSpec{Name: onnxexport.OutputEpistemic}}
	return modelPair{"features input", saveModel(t, dm), saveModel(t, ax), ds, as}
}
