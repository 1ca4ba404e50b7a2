package stream

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline/offlinetest"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// dynamicBatchFile rewrites an ONNX file with a dynamic batch dimension
// (onnx.DynamicBatch, what `didoedge model batch` runs).
func dynamicBatchFile(t *testing.T, path string) {
	t.Helper()
	m, err := onnx.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onnx.DynamicBatch(m, ""); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := onnx.WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
}

// conventionConfig writes a runtime config for a convention model and its
// AuxUE (io_spec files) with the given camera section.
func conventionConfig(t *testing.T, dir, cameras, depth, depthSpec, aux, auxSpec, extra string) *runconfig.Config {
	t.Helper()
	for name, text := range map[string]string{"quiet.yaml": testmodels.QuietCalibration} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := fmt.Sprintf(testmodels.ConfigYAML, "  url: rtsp://127.0.0.1:1/unused", "quiet.yaml", testmodels.ConfigZones)
	i, j := strings.Index(text, "depth:\n"), strings.Index(text, "alerts:\n")
	if i < 0 || j < i {
		t.Fatal("testmodels.ConfigYAML has no depth section before alerts")
	}
	text = text[:i] + fmt.Sprintf("depth: {model: %s, io_spec: %s}\nauxue: {model: %s, io_spec: %s}\n", depth, depthSpec, aux, auxSpec) + text[j:] + extra
	text = strings.Replace(text, "camera:\n  url: rtsp://127.0.0.1:1/unused\n", cameras, 1)
	if strings.HasPrefix(cameras, "cameras:") {
		text = strings.Replace(text, "  camera: front\n", "", 1)
	}
	path := filepath.Join(dir, "runtime.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := runconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// blockFrame is a frame of k x the model input's size made of k x k
// blocks of one colour each, so that the pipeline's bilinear resize
// (pixel centres aligned) gives the block colours back exactly: the model
// input is known pixel by pixel. It returns the frame and the input image.
func blockFrame(inW, inH, k, pattern int) (*camera.Frame, []uint8) {
	in := make([]uint8, 3*inW*inH)
	for y := range inH {
		for x := range inW {
			o := 3 * (y*inW + x)
			in[o] = uint8((x*37 + y*11 + pattern*50) % 256)
			in[o+1] = uint8((y*23 + x*3 + 5 + pattern*17) % 256)
			in[o+2] = uint8((x*y*3 + 7 + pattern) % 256)
		}
	}
	w, h := k*inW, k*inH
	f := &camera.Frame{SourceID: "front", Width: w, Height: h, RGB: make([]uint8, 3*w*h), Seq: 1, Capture: time.Now(), Decoded: time.Now()}
	for y := range h {
		for x := range w {
			copy(f.RGB[3*(y*w+x):3*(y*w+x)+3], in[3*((y/k)*inW+x/k):])
		}
	}
	return f, in
}

// conventionReadout is the depth map the pipeline must hand on for a
// frame of k x the model input in (inW x inH): per input pixel the known
// depth d (testmodels.ConventionDepth) times focal for a canonical-camera
// model, or the relative inverse depth r = rel(d) of a relative model;
// resampled to the frame bilinearly with pixel centres aligned and
// positions clamped (the maps come back at the frame's size); for a
// relative model then the relative depth D = span / (r - r_min + 0.05
// span) over the frame (Models.relative). d is the known depth per input
// pixel.
func conventionReadout(in []uint8, inW, inH, k int, focal float64, rel func(d float64) float64) (want, d []float64) {
	n := inW * inH
	v := make([]float64, n)
	d = make([]float64, n)
	for i := range n {
		d[i] = testmodels.ConventionDepth(in[3*i], in[3*i+1], in[3*i+2])
		v[i] = d[i] * focal
		if rel != nil {
			v[i] = rel(d[i])
		}
	}
	tap := func(f, n int) (int, int, float64) {
		s := math.Max(0, math.Min((float64(f)+0.5)/float64(k)-0.5, float64(n-1)))
		a := int(s)
		return a, min(a+1, n-1), s - float64(a)
	}
	W, H := k*inW, k*inH
	want = make([]float64, W*H)
	for y := range H {
		y0, y1, fy := tap(y, inH)
		for x := range W {
			x0, x1, fx := tap(x, inW)
			top := v[y0*inW+x0] + fx*(v[y0*inW+x1]-v[y0*inW+x0])
			bot := v[y1*inW+x0] + fx*(v[y1*inW+x1]-v[y1*inW+x0])
			want[y*W+x] = top + fy*(bot-top)
		}
	}
	if rel == nil {
		return want, d
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range want {
		lo, hi = min(lo, r), max(hi, r)
	}
	span := hi - lo
	for i, r := range want {
		want[i] = span / (r - lo + 0.05*span)
	}
	return want, d
}

// mapsTap is a Tap that keeps a copy of every frame's maps.
type mapsTap struct{ got chan tapMaps }

type tapMaps struct {
	camera        string
	seq           uint64
	width, height int
	depth, scale  []float32
}

func (m *mapsTap) Wants(string) bool { return true }
func (m *mapsTap) Frame(f *TapFrame) {
	select {
	case m.got <- tapMaps{camera: f.Camera, seq: f.Seq, width: f.Maps.Width, height: f.Maps.Height,
		depth: append([]float32(nil), f.Maps.Depth...), scale: append([]float32(nil), f.Maps.Scale...)}:
	default:
	}
}
func (m *mapsTap) Event(*alerts.Event) error { return nil }
func (m *mapsTap) State(*alerts.State) error { return nil }

// checkReadout compares the tapped depth map (k x the input's size) with
// the closed form within tol (relative); for a relative model it also
// checks the direction: on the frame pixels that sit on input pixel
// centres (k odd), the relative depth grows with the known depth (farther
// = larger D).
func checkReadout(t *testing.T, name string, got tapMaps, inW, inH, k int, want, d []float64, tol float64, relative bool) {
	t.Helper()
	W, H := k*inW, k*inH
	if got.width != W || got.height != H || len(got.depth) != len(want) {
		t.Fatalf("%s: maps %dx%d (%d depths), want the frame's %dx%d", name, got.width, got.height, len(got.depth), W, H)
	}
	bad := 0
	for i, w := range want {
		if g := float64(got.depth[i]); !(math.Abs(g-w) <= tol*math.Abs(w)) {
			if bad++; bad <= 3 {
				t.Errorf("%s: depth at (%d, %d) = %v, closed form %v", name, i%W, i/W, g, w)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d depths off the closed form by more than %g", name, bad, len(want), tol)
	}
	if !relative {
		return
	}
	if k%2 == 0 {
		t.Fatalf("%s: the direction check needs an odd k, got %d", name, k)
	}
	at := func(i int) float32 { return got.depth[(k*(i/inW)+k/2)*W+k*(i%inW)+k/2] }
	idx := make([]int, len(d))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return d[idx[a]] < d[idx[b]] })
	for j := 1; j < len(idx); j++ {
		a, b := idx[j-1], idx[j]
		if d[b] > d[a]*(1+1e-3) && !(at(b) > at(a)) {
			t.Fatalf("%s: relative depth does not grow with depth: d %v -> D %v, d %v -> D %v", name, d[a], at(a), d[b], at(b))
		}
	}
	near, far := at(idx[0]), at(idx[len(idx)-1])
	if !(far > 5*near) {
		t.Fatalf("%s: relative depth %v at the nearest pixel, %v at the farthest: not the declared direction", name, near, far)
	}
}

// conventionCase is one convention model as the runtime reads it.
type conventionCase struct {
	name, kind string
	spec       string                  // replaces the convention's spec lines ("" keeps them)
	focal      float64                 // read-out factor of a canonical-camera model (0: 1)
	rel        func(d float64) float64 // relative inverse depth of a relative model
	tol        float64
	batched    bool // also run two cameras as one batch (dynamic-batch copies)
}

// Camera intrinsics of the canonical case, at the frame's size (3x the
// input): fx 240 px on a 192 px wide frame is 80 px at the 64 px input, so
// the read-out is the canonical output (d * 1000/50) times 80/1000 = 1.6 d.
// Without the scaling with the frame (fx 240 at the input) it would be 4.8 d.
const (
	canonicalFx    = 240.0
	canonicalFocal = canonicalFx / 3 / testmodels.ConvFocalInput
)

// TestConventionsThroughRuntime: every output convention of published
// depth networks (testmodels.Convention), declared in its spec lines with
// an AuxUE whose contract follows the spec, runs through the streaming
// runtime (stream.New + Run on a mailbox source) on a frame three times
// the model's input size made of one colour per input pixel, and the depth
// map the pipeline hands on (its Tap, at the frame's size) equals the
// closed form pixel by pixel (resampled to the frame as the maps are):
// the known depth, 1.6 x it for the canonical-camera model
// (camera.intrinsics scaled from the frame to the input), and for the relative models (the ViT, and the negative-disparity
// model declared relative with scale -1) the relative depth D of their
// relative inverse depth, growing with the known depth (the declared
// direction: nearer = larger r, farther = larger D). The uint8 NHWC and
// float16 models also run as dynamic-batch copies with two cameras
// (pipeline.batch_size 2) in one batch, each camera's maps its own closed
// form. Tolerances are the command test's: 1e-4 relative, 2e-3 for float16.
func TestConventionsThroughRuntime(t *testing.T) {
	requireORT(t)
	cases := []conventionCase{
		{name: "negdisp", kind: "negdisp", tol: 1e-4},
		{name: "negdisp-relative", kind: "negdisp", tol: 1e-4,
			spec: "input: {name: image, height: 32, width: 64}\ndepth: {name: disp, meaning: relative, scale: -1}\n",
			rel:  func(d float64) float64 { return testmodels.ConvNegDisp / d }},
		{name: "sigmoid", kind: "sigmoid", tol: 1e-4},
		{name: "canonical", kind: "canonical", focal: canonicalFocal, tol: 1e-4},
		{name: "multiscale", kind: "multiscale", tol: 1e-4},
		{name: "uint8", kind: "uint8", tol: 1e-4, batched: true},
		{name: "half", kind: "half", tol: 2e-3, batched: true},
		{name: "vit", kind: "vit", tol: 1e-4, rel: func(d float64) float64 { return testmodels.MiDaSA/d + testmodels.MiDaSB }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			model, spec := testmodels.Convention(t, tc.kind, dir)
			if tc.spec != "" {
				if err := os.WriteFile(spec, []byte(tc.spec), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// A test import of offline (offlinetest): the layout rules
			// cover non-test code only.
			aux, auxSpec := offlinetest.AuxUE(t, spec, dir)
			inW, inH := testmodels.ConventionSize(tc.kind)
			focal := tc.focal
			if focal == 0 {
				focal = 1
			}
			cam := "camera:\n  url: rtsp://127.0.0.1:1/unused\n"
			if tc.kind == "canonical" {
				cam += fmt.Sprintf("  intrinsics: {fx: %g, fy: %g, cx: %g, cy: %g, width: %d, height: %d}\n",
					canonicalFx, canonicalFx, float64(3*inW-1)/2, float64(3*inH-1)/2, 3*inW, 3*inH)
			}
			cfg := conventionConfig(t, dir, cam, model, spec, aux, auxSpec, "")
			tap := &mapsTap{got: make(chan tapMaps, 4)}
			src := camera.NewMailbox()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, err := New(ctx, cfg, Options{Source: src, Tap: tap})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			defer func() {
				cancel()
				<-done
			}()
			frame, in := blockFrame(inW, inH, 3, 0)
			src.Publish(frame)
			var got tapMaps
			select {
			case got = <-tap.got:
			case <-time.After(20 * time.Second):
				t.Fatalf("no assessed frame in 20 s (frames %d, errors %d)", p.Metrics().Camera(0).Frames.Load(), p.Metrics().Camera(0).Invalid.Load())
			}
			want, d := conventionReadout(in, inW, inH, 3, focal, tc.rel)
			checkReadout(t, "run", got, inW, inH, 3, want, d, tc.tol, tc.rel != nil)
			if !tc.batched {
				return
			}
			cancel()
			<-done
			done <- nil // the deferred wait returns at once
			checkBatched(t, tc, dir, model, spec, aux, auxSpec)
		})
	}
}

// checkBatched runs the convention's model and AuxUE as dynamic-batch
// copies with two cameras (pipeline.batch_size 2) and one batch of their
// frames (of different sizes and patterns): each camera's tapped maps are
// its own frame's closed form.
func checkBatched(t *testing.T, tc conventionCase, dir, model, spec, aux, auxSpec string) {
	t.Helper()
	bdir := filepath.Join(dir, "batched")
	if err := os.MkdirAll(bdir, 0o755); err != nil {
		t.Fatal(err)
	}
	bm, ba := filepath.Join(bdir, filepath.Base(model)), filepath.Join(bdir, filepath.Base(aux))
	for src, dst := range map[string]string{model: bm, aux: ba} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		dynamicBatchFile(t, dst)
	}
	cams := "cameras:\n  - {name: a, url: \"rtsp://127.0.0.1:1/a\"}\n  - {name: b, url: \"rtsp://127.0.0.1:1/b\"}\n"
	cfg := conventionConfig(t, bdir, cams, bm, spec, ba, auxSpec, "pipeline: {batch_size: 2}\n")
	tap := &mapsTap{got: make(chan tapMaps, 4)}
	p, err := New(context.Background(), cfg, Options{Sources: []camera.Source{camera.NewMailbox(), camera.NewMailbox()}, Tap: tap})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.batch != 2 {
		t.Fatalf("batch %d, want pipeline.batch_size 2", p.batch)
	}
	inW, inH := testmodels.ConventionSize(tc.kind)
	fa, ina := blockFrame(inW, inH, 2, 1)
	fb, inb := blockFrame(inW, inH, 3, 2)
	cs, slots := stageAll(t, p, []*camera.Frame{fa, fb})
	p.runBatch(context.Background(), cs, slots, []*camera.Frame{fa, fb})
	byCam := map[string]tapMaps{}
	for range 2 {
		select {
		case g := <-tap.got:
			byCam[g.camera] = g
		default:
		}
	}
	for _, c := range []struct {
		name string
		in   []uint8
		k    int
	}{{"a", ina, 2}, {"b", inb, 3}} {
		g, ok := byCam[c.name]
		if !ok {
			t.Fatalf("batched: no maps of camera %s (got %d cameras)", c.name, len(byCam))
		}
		want, d := conventionReadout(c.in, inW, inH, c.k, 1, tc.rel)
		checkReadout(t, "batched camera "+c.name, g, inW, inH, c.k, want, d, tc.tol, tc.rel != nil)
	}
}
