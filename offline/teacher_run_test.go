package offline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/auxue/onnxexport"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/pkg/onnx"
	"github.com/didoedge/didoedge/runtime/apps/export"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
	"github.com/didoedge/didoedge/runtime/record"
)

// seededDepthModel writes a seeded depthnet of W x H (random weights:
// distinct seeds, distinct models and sha256) as NAME.onnx and NAME.yaml.
func seededDepthModel(t *testing.T, dir, name string, seed uint64, w, h int) (model, spec string) {
	t.Helper()
	net, err := depthnet.New(depthnet.Config{Height: h, MaxDepth: 80, Width: 1, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	model, spec, err = WriteDepthArtifacts(net, dir, name, w)
	if err != nil {
		t.Fatal(err)
	}
	return model, spec
}

// TestAuxTrainTeacherCache: the teacher's read-outs are cached keyed by the
// teacher's sha256: another student reuses them, another teacher does not;
// with the frames' own ground truth kept, the real pixels win and are
// counted, and the teacher's cache is the same.
func TestAuxTrainTeacherCache(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ONNX models and trains AuxUEs")
	}
	ctx := context.Background()
	const W, H = 64, 32
	dir := t.TempDir()
	student, sspec := seededDepthModel(t, dir, "student", 5, W, H)
	other, ospec := seededDepthModel(t, dir, "student2", 8, W, H)
	ta, _ := seededDepthModel(t, dir, "teacher-a", 6, W, H)
	tb, _ := seededDepthModel(t, dir, "teacher-b", 7, W, H)
	cache := filepath.Join(dir, "cache")
	base := AuxTrainConfig{
		AuxDepthModel: AuxDepthModel{DepthModel: student, DepthSpec: sspec},
		AuxData:       AuxData{Width: W, Height: H, Drives: 2, FramesPerDrive: 10, Frames: 4, ValFrames: 1, ValDrives: 1},
		AuxHeads:      AuxHeads{K: 4},
		AuxOptim:      AuxOptim{Epochs: 1, Batch: 2},
		AuxTeacher:    AuxTeacher{Teacher: TeacherConfig{Model: ta}, IgnoreGroundTruth: true},
		Seed:          4,
		CacheDir:      cache,
	}
	run := func(cfg AuxTrainConfig) *TeacherReport {
		t.Helper()
		_, st, err := AuxTrain(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Teacher == nil {
			t.Fatal("no teacher report")
		}
		return st.Teacher
	}
	a := run(base)
	if a.FramesRun != 5 || a.FramesReused != 0 || a.Train.Teacher == 0 || a.Train.Real != 0 || a.Val.Teacher == 0 {
		t.Fatalf("first run: %+v", a)
	}
	if sum, err := sha256File(ta); err != nil || a.SHA256 != sum {
		t.Fatalf("teacher sha256 %q, file's %q (%v)", a.SHA256, sum, err)
	}
	// Another student: its own cache, the same teacher read-outs.
	o := base
	o.DepthModel, o.DepthSpec = other, ospec
	if r := run(o); r.FramesReused != 5 || r.FramesRun != 0 || r.Seconds != 0 || r.Train != a.Train {
		t.Fatalf("another student: teacher frames reused %d of %d, teacher time %v s, counts %+v vs %+v", r.FramesReused, r.FramesRun+r.FramesReused, r.Seconds, r.Train, a.Train)
	}
	// Another teacher: its own read-outs.
	b := base
	b.Teacher.Model = tb
	if r := run(b); r.FramesReused != 0 || r.FramesRun != 5 || r.SHA256 == a.SHA256 {
		t.Fatalf("another teacher: %+v", r)
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "teacher-*"))
	if len(dirs) != 4 {
		t.Fatalf("teacher caches %v, want train and val of two teachers", dirs)
	}
	// The ground truth kept: real pixels win (the sim pool's sparse
	// LiDAR), the teacher labels the rest; the teacher's cache is reused.
	g := base
	g.IgnoreGroundTruth = false
	r := run(g)
	if r.FramesReused != 5 || r.Train.Real == 0 || r.Train.FramesWithGT != 4 || r.Train.Real+r.Train.Teacher+r.Train.BeyondRange != a.Train.Teacher+a.Train.BeyondRange {
		t.Fatalf("with ground truth: %+v (teacher only: %+v)", r.Train, a.Train)
	}
}

// TestTrainAuxUEOnRecordingWithTeacher: a recorded drive (runtime/record
// MCAP, no depth ground truth) exported to the KITTI layout trains an
// AuxUE end to end with a teacher; without one the frames are refused;
// the AuxUE's spec records the teacher. The MCAP file itself as --data
// trains on the same frames.
func TestTrainAuxUEOnRecordingWithTeacher(t *testing.T) {
	if testing.Short() {
		t.Skip("records, runs ONNX models and trains an AuxUE")
	}
	ctx := context.Background()
	const W, H = 64, 32
	dir := t.TempDir()
	recDir := filepath.Join(dir, "rec")
	rec, err := record.New(record.Config{Mode: record.ModeContinuous, Dir: recDir, FrameFormat: "png", Queue: 64}, record.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: W, Height: H, Seed: 5, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	fx, fy, cx, cy := r.Intrinsics()
	if err := rec.SetCamera("front", record.Intrinsics{Width: W, Height: H, Fx: fx, Fy: fy, Cx: cx, Cy: cy}); err != nil {
		t.Fatal(err)
	}
	sf := sim.NewFrame(W, H)
	for k := 1; k <= 6; k++ {
		if err := r.Render(3*k, sf); err != nil {
			t.Fatal(err)
		}
		if !rec.Frame(&record.Frame{Camera: "front", Seq: uint64(k), Capture: time.Unix(1_800_000_000, int64(k)*1e8), Width: W, Height: H, RGB: sf.RGB}) {
			t.Fatalf("frame %d dropped", k)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := rec.Close(cctx); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(recDir, "*.mcap"))
	if len(files) != 1 {
		t.Fatalf("recordings %v", files)
	}
	data := filepath.Join(dir, "drive")
	if _, err := export.KITTI(ctx, files[0], export.Options{Dir: data, Split: "train"}); err != nil {
		t.Fatal(err)
	}
	student, sspec := seededDepthModel(t, dir, "student", 5, W, H)
	teacher, _ := seededDepthModel(t, dir, "teacher", 6, W, H)
	cfg := AuxTrainConfig{
		AuxDepthModel: AuxDepthModel{DepthModel: student, DepthSpec: sspec},
		AuxData:       AuxData{Data: data, ValSplit: "none"},
		AuxHeads:      AuxHeads{K: 4},
		AuxOptim:      AuxOptim{Epochs: 2, Batch: 2, Checkpoint: filepath.Join(dir, "auxue.ckpt")},
		CacheDir:      filepath.Join(dir, "cache"),
	}
	if _, _, err := AuxTrain(ctx, cfg); err == nil || !strings.Contains(err.Error(), "no ground truth") {
		t.Fatalf("a recording without a teacher: %v", err)
	}
	cfg.Teacher = TeacherConfig{Model: teacher}
	sum, err := AuxRun{Train: cfg, Out: filepath.Join(dir, "models"), Name: "rec-auxue"}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tt := sum.Teacher
	if tt == nil || sum.Frames != 6 || tt.Train.Real != 0 || tt.Train.FramesWithGT != 0 || tt.Train.Teacher == 0 ||
		tt.Train.Teacher+tt.Train.BeyondRange != 6*W*H || len(sum.Epochs) != 2 {
		t.Fatalf("summary: frames %d, epochs %d, teacher %+v", sum.Frames, len(sum.Epochs), tt)
	}
	spec, err := ReadSpec(sum.Spec, infer.KindAuxUE)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sha256File(teacher)
	if got := spec.AuxUE.Teacher; got == nil || got.SHA256 != want || got.TeacherPixels != tt.Train.Teacher || got.MaxDepth != 80 {
		t.Fatalf("the AuxUE's spec records the teacher %+v, want sha256 %s and %d pixels", got, want, tt.Train.Teacher)
	}
	if _, err := os.Stat(sum.Model); err != nil {
		t.Fatal(err)
	}
	// The recording itself as --data: exported into the cache once, the
	// same frames and targets; a second run reuses the export.
	direct := cfg
	direct.Data, direct.ValSplit, direct.Checkpoint = files[0], "val", ""
	for run := 0; run < 2; run++ {
		_, st, err := AuxTrain(ctx, direct)
		if err != nil {
			t.Fatal(err)
		}
		if st.Frames != 6 || st.ValFrames != 0 || st.Teacher.Train.Teacher != tt.Train.Teacher {
			t.Fatalf("run %d on the recording: %d frames, %d val, teacher pixels %d, want 6, 0, %d", run, st.Frames, st.ValFrames, st.Teacher.Train.Teacher, tt.Train.Teacher)
		}
	}
	if exports, _ := filepath.Glob(filepath.Join(dir, "cache", "recording-*", "meta.json")); len(exports) != 1 {
		t.Fatalf("exports of the recording in the cache: %v", exports)
	}
}

func sha256File(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// TestTeacherNativeConfidence: a teacher with its own confidence output
// (a Metric3D v2-like model that python3-onnx builds: depth and
// confidence known in closed form from each pixel's colour) labels a
// frame through ONNX Runtime: the target is its depth where its read-out
// u = 1 - c stays within --teacher-max-uncertainty, and nothing where it
// does not; the read-out comes back from the teacher's cache.
func TestTeacherNativeConfidence(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an ONNX model")
	}
	dir := t.TempDir()
	model, spec := testmodels.ConfidenceModel(t, "metric3d", dir)
	ctx := context.Background()
	const bound = 0.25
	tch, err := openTeacher(ctx, TeacherConfig{Model: model, Spec: spec, MaxUncertainty: bound}, onnxrt.Config{}, false, 80, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tch.Close()
	W, H := testmodels.Width, testmodels.Height
	s := &dataset.Sample{Name: "gradient", Width: W, Height: H, RGB: make([]uint8, W*H*3)}
	for i := 0; i < W*H; i++ {
		s.RGB[3*i], s.RGB[3*i+1], s.RGB[3*i+2] = uint8(i*7), uint8(i%W*255/(W-1)), uint8(i/W*8)
	}
	c, err := openTeacherCache(filepath.Join(dir, "cache"), map[string]any{"test": 1})
	if err != nil {
		t.Fatal(err)
	}
	for pass, wantReused := range []int{0, 1} {
		reused := 0
		if err := tch.readout(ctx, c, 0, s, &reused); err != nil {
			t.Fatal(err)
		}
		if reused != wantReused {
			t.Fatalf("pass %d: reused %d", pass, reused)
		}
		lc, err := tch.label(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		var low int64
		for i, got := range tch.target {
			r, g, b := s.RGB[3*i], s.RGB[3*i+1], s.RGB[3*i+2]
			u := testmodels.ConfidenceWant("metric3d", r, g, b)
			if math.Abs(u-bound) < 1e-4 {
				continue // float32 rounding decides
			}
			if u > bound {
				low++
				if got != 0 {
					t.Fatalf("pass %d pixel %d: u %.4f > %v labelled %v", pass, i, u, bound, got)
				}
				continue
			}
			if d := testmodels.ConventionDepth(r, g, b); math.Abs(float64(got)-d) > 1e-4*d {
				t.Fatalf("pass %d pixel %d: target %v, want the teacher's depth %v", pass, i, got, d)
			}
		}
		if low == 0 || lc.LowConfidence < low || lc.Teacher == 0 || lc.Teacher+lc.LowConfidence != int64(W*H) {
			t.Fatalf("pass %d: counts %+v, %d pixels above the bound", pass, lc, low)
		}
	}
}

// TestTeacherBatchedEqualsPerFrame: the teacher run in batches of 3 (from
// a copy of the fixed-batch teacher made dynamic) on 5 frames (a full
// batch and a partial one) caches the read-outs the per-frame run makes
// and labels the same targets, for a depth-only teacher, for one with
// its own AuxUE (K/S as its confidence) and for one with a native
// confidence output (python3-onnx, Metric3D-v2-like); the frames it ran are not
// counted as reused, and the cache and the report name the files' sha256.
func TestTeacherBatchedEqualsPerFrame(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ONNX models")
	}
	ctx := context.Background()
	const W, H, frames = 64, 32, 5
	dir := t.TempDir()
	model, spec := seededDepthModel(t, dir, "teacher", 6, W, H)
	ds, err := ReadSpec(spec, infer.KindDepth)
	if err != nil {
		t.Fatal(err)
	}
	c, err := AuxContract(ds, 4, 2, 80, true)
	if err != nil {
		t.Fatal(err)
	}
	am, err := auxue.NewModel(auxue.Config{Form: auxue.FormDense, In: c.Channels(), EncoderWidth: 4, SharedEncoder: true,
		Hidden: 4, K: 8, Lambda: 0.01, GlobalContext: true, GlobalContextBands: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	om, err := onnxexport.ExportAuxUEContract(am, c)
	if err != nil {
		t.Fatal(err)
	}
	aux, auxSpec := filepath.Join(dir, "teacher-auxue.onnx"), filepath.Join(dir, "teacher-auxue.yaml")
	if err := onnx.WriteFile(aux, om); err != nil {
		t.Fatal(err)
	}
	b, err := AuxUESpec(ds, c, am, infer.AuxUEInfo{}).Marshal("test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auxSpec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cm, cs := testmodels.ConfidenceModel(t, "metric3d", dir)
	for _, tc := range []struct {
		name string
		cfg  TeacherConfig
	}{
		{"depth only", TeacherConfig{Model: model, Spec: spec}},
		{"with its AuxUE", TeacherConfig{Model: model, Spec: spec, AuxUE: aux, AuxUESpec: auxSpec, MaxUncertainty: 0.5}},
		{"native confidence", TeacherConfig{Model: cm, Spec: cs, MaxUncertainty: 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := newSimPool(4, 2, 10, W, H, frames, 0, 0x74)
			if err != nil {
				t.Fatal(err)
			}
			type run struct {
				depth, conf, target [][]float32
				counts              []LabelCounts
				rep                 *TeacherReport
			}
			do := func(batch int) run {
				cfg := tc.cfg
				cfg.Batch = batch
				tch, err := openTeacher(ctx, cfg, onnxrt.Config{IntraOpThreads: 1}, false, 80, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tch.Close()
				if got := tch.batch(); got != max(batch, 1) {
					t.Fatalf("batch %d: the teacher runs %d frames a run", batch, got)
				}
				if want, err := sha256File(cfg.Model); err != nil || tch.sha != want {
					t.Fatalf("batch %d: teacher sha256 %s, the file's %s (%v)", batch, tch.sha, want, err)
				}
				cache, err := openTeacherCache(filepath.Join(t.TempDir(), "cache"), map[string]any{"test": batch})
				if err != nil {
					t.Fatal(err)
				}
				tr := &teacherRun{t: tch, cache: cache}
				if err := tr.prefill(ctx, src); err != nil {
					t.Fatal(err)
				}
				var r run
				rec := &trainingRecord{labels: make([]uint32, labelFields)}
				for i := range frames {
					s, err := src.Frame(i)
					if err != nil {
						t.Fatal(err)
					}
					student := make([]float32, W*H)
					for k := range student {
						student[k] = 10
					}
					out, err := tr.label(ctx, i, s, infer.DepthPass{Frame: student}, rec)
					if err != nil {
						t.Fatal(err)
					}
					r.depth = append(r.depth, clone32(tch.depth))
					r.conf = append(r.conf, clone32(tch.conf))
					r.target = append(r.target, clone32(out.Sparse))
					r.counts = append(r.counts, decodeLabels(rec.labels))
				}
				r.rep = tch.rep
				return r
			}
			one, three := do(1), do(3)
			if one.rep.FramesReused != 0 || three.rep.FramesReused != 0 || three.rep.FramesRun != frames {
				t.Fatalf("reused %d and %d, batched frames run %d", one.rep.FramesReused, three.rep.FramesReused, three.rep.FramesRun)
			}
			for i := range frames {
				if (one.conf[i] == nil) != (tc.name == "depth only") {
					t.Fatalf("frame %d: confidence %v", i, one.conf[i] != nil)
				}
				for name, pair := range map[string][2][]float32{"depth": {one.depth[i], three.depth[i]}, "confidence": {one.conf[i], three.conf[i]},
					"target": {one.target[i], three.target[i]}} {
					a, b := pair[0], pair[1]
					if len(a) != len(b) {
						t.Fatalf("frame %d %s: %d and %d values", i, name, len(a), len(b))
					}
					for k := range a {
						// ONNX Runtime may sum a batch's convolutions in
						// another order: a few ulps.
						if math.Abs(float64(a[k]-b[k])) > 1e-5*math.Max(1, math.Abs(float64(a[k]))) {
							t.Fatalf("frame %d %s pixel %d: per frame %v, batched %v", i, name, k, a[k], b[k])
						}
					}
				}
				if one.counts[i].Teacher == 0 || one.counts[i] != three.counts[i] {
					t.Fatalf("frame %d: counts per frame %+v, batched %+v", i, one.counts[i], three.counts[i])
				}
			}
		})
	}
}

func clone32(x []float32) []float32 {
	if x == nil {
		return nil
	}
	return append([]float32(nil), x...)
}
