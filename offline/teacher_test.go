package offline

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/infer"
)

// TestTeacherLabel: the targets are the real ground truth where the frame
// has it, else the teacher's depth (aligned in inverse depth when the
// teacher is relative) where the teacher can vouch for it, and nothing
// on the pixels beyond its range, masked, or below its confidence level.
func TestTeacherLabel(t *testing.T) {
	const W, H = 8, 4
	n := W * H
	// The true depth of pixel i: 2 to 64 m; pixel 5 and 6 beyond the
	// 70 m range (the sky of a LiDAR-trained teacher, or a clamp).
	depth := make([]float32, n)
	for i := range depth {
		depth[i] = 2 + 2*float32(i)
	}
	depth[5], depth[6] = 75, 70
	// Inverse-depth relative read-out r = A/d + B, the affine map a
	// relative teacher leaves unknown.
	const A, B = 37.5, -0.2
	rel := make([]float32, n)
	for i, d := range depth {
		rel[i] = float32(A/float64(d) + B)
	}
	// Real ground truth on 20 pixels (>= minAlignPixels), including the
	// masked pixel 1 and the beyond-range pixel 5, values off the teacher.
	real := make([]float32, n)
	for i := 0; i < 20; i++ {
		real[i] = depth[i] * 1.1
	}
	mask := make([]bool, n)
	for i := range mask {
		mask[i] = i != 1 && i != 25
	}
	conf := make([]float32, n)
	for i := range conf {
		conf[i] = float32(i%8) / 8 // u = 7/8 on pixels 7, 15, 23, 31
	}
	cases := []struct {
		name            string
		relative        bool
		studentRelative bool
		teacher         []float32
		conf            []float32
		real            []float32
		drop            float64
		// want: the target of each pixel: 'r' real, 't' teacher (the true
		// depth), '-' none.
		want    string
		counts  LabelCounts
		wantErr string
	}{
		{name: "metric teacher, no ground truth", teacher: depth,
			want:   "t-ttt--t tttttttt tttttttt t-tttttt",
			counts: LabelCounts{Teacher: 28, BeyondRange: 2, Masked: 2}},
		{name: "real ground truth wins per pixel", teacher: depth, real: real,
			want:   "rrrrrrrr rrrrrrrr rrrrtttt t-tttttt",
			counts: LabelCounts{Real: 20, Teacher: 11, Masked: 1, FramesWithGT: 1}},
		{name: "relative teacher aligned to the real ground truth", relative: true, teacher: rel, real: scaled(depth, 20),
			want:   "rrrrrrrr rrrrrrrr rrrrtttt t-tttttt",
			counts: LabelCounts{Real: 20, Teacher: 11, Masked: 1, FramesWithGT: 1}},
		{name: "relative teacher aligned to the metric student", relative: true, teacher: rel,
			want:   "t-ttt--t tttttttt tttttttt t-tttttt",
			counts: LabelCounts{Teacher: 28, BeyondRange: 2, Masked: 2}},
		{name: "relative teacher and student without ground truth", relative: true, studentRelative: true, teacher: rel,
			wantErr: "nothing metric"},
		{name: "the least confident quarter dropped", teacher: depth, conf: conf, drop: 0.25,
			// u >= 6/8 dropped: the top quarter of u is 6/8 and 7/8 (8 of 32).
			want:   "t-ttt--- tttttt-- tttttt-- t-tttt--",
			counts: LabelCounts{Teacher: 21, BeyondRange: 2, Masked: 2, LowConfidence: 7}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc := &teacher{cfg: TeacherConfig{MaxDepth: 70, Mask: "mask.png", ConfidenceDrop: c.drop}, relative: c.relative,
				studentRelative: c.studentRelative, mask: mask, maskW: W, maskH: H}
			tc.depth = append([]float32(nil), c.teacher...)
			if c.conf != nil {
				tc.conf = append([]float32(nil), c.conf...)
			}
			s := &dataset.Sample{Name: "f", Width: W, Height: H, Sparse: c.real}
			lc, err := tc.label(s, depth)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if lc != c.counts {
				t.Errorf("counts %+v, want %+v", lc, c.counts)
			}
			want := strings.ReplaceAll(c.want, " ", "")
			for i, got := range tc.target {
				var exp float32
				switch want[i] {
				case 'r':
					exp = c.real[i]
				case 't':
					exp = depth[i]
				}
				if math.Abs(float64(got-exp)) > 1e-4*float64(exp)+1e-6 {
					t.Errorf("pixel %d: target %v, want %v (%c)", i, got, exp, want[i])
				}
			}
		})
	}
}

// scaled is depth on its first k pixels, 0 elsewhere: exact ground truth
// for the alignment.
func scaled(depth []float32, k int) []float32 {
	out := make([]float32, len(depth))
	copy(out, depth[:k])
	return out
}

func TestTeacherConfigCheck(t *testing.T) {
	for _, c := range []struct {
		cfg  TeacherConfig
		want string
	}{
		{TeacherConfig{Model: "t.onnx", MaxDepth: -1}, "--teacher-max-depth"},
		{TeacherConfig{Model: "t.onnx", ConfidenceDrop: 1}, "--teacher-confidence-drop"},
		{TeacherConfig{Model: "t.onnx", MaxUncertainty: math.NaN()}, "--teacher-max-uncertainty"},
		{TeacherConfig{Mask: "m.png"}, "need --teacher"},
		{TeacherConfig{Model: "t.onnx", MaxUncertainty: -2}, "--teacher-max-uncertainty"},
		{TeacherConfig{Model: "t.onnx", BlockShare: 1.5}, "--teacher-block-share"},
		{TeacherConfig{Model: "t.onnx", Batch: maxTeacherBatch + 1}, "--teacher-batch"},
	} {
		if err := c.cfg.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	for _, c := range []TeacherConfig{{Model: "t.onnx", MaxDepth: 80, ConfidenceDrop: 0.2}, {Model: "t.onnx", MaxUncertainty: TeacherBoundAuto, BlockShare: 0.5, Batch: 4},
		{MaxUncertainty: TeacherBoundAuto, BlockShare: 0.5, Batch: 4}} { // the command's defaults, with and without a teacher
		if err := c.check(); err != nil {
			t.Errorf("valid config %+v: %v", c, err)
		}
	}
}

// TestTeacherAutoBound: the automatic bound is the K/S of half the DIDO
// equilibrium evidence 1/lambda: S = K + 1/(2 lambda); it lies between
// the equilibrium K/S* = K/(K + 1/lambda) and the prior's 1.
func TestTeacherAutoBound(t *testing.T) {
	for _, c := range []struct {
		k      int
		lambda float64
		want   float64
	}{{32, 0.01, 32.0 / 82}, {8, 0.01, 8.0 / 58}, {32, 0.1, 32.0 / 37}} {
		got := teacherAutoBound(c.k, c.lambda)
		eq := float64(c.k) / (float64(c.k) + 1/c.lambda)
		if math.Abs(got-c.want) > 1e-12 || !(got > eq && got < 1) {
			t.Errorf("K %d lambda %g: %v, want %v (equilibrium %v)", c.k, c.lambda, got, c.want, eq)
		}
	}
}

// FuzzTeacherCacheLoad: a teacher cache file of any content is read or
// refused with an error, never a panic, and never read beyond the size
// its frame implies.
func FuzzTeacherCacheLoad(f *testing.F) {
	dir := f.TempDir()
	c := &teacherCache{dir: dir}
	depth, conf := []float32{1, 2, 3, 4, 5, 6}, []float32{0, .5, 1, 0, .5, 1}
	if err := c.store(0, 3, 2, depth, conf); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(c.path(0))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, true)
	f.Add(good[:20], true)
	f.Add([]byte("DTC1"), false)
	f.Fuzz(func(t *testing.T, b []byte, withConf bool) {
		if err := os.WriteFile(c.path(1), b, 0o644); err != nil {
			t.Fatal(err)
		}
		d := make([]float32, 6)
		var cf []float32
		if withConf {
			cf = make([]float32, 6)
		}
		ok, err := c.load(1, 3, 2, d, cf)
		if ok && err != nil {
			t.Fatalf("ok with error %v", err)
		}
		if ok && withConf && string(b) == string(good) && (d[5] != 6 || cf[1] != .5) {
			t.Fatalf("read back %v %v", d, cf)
		}
	})
}

// TestTeacherBlockGate: with BlockShare, a block of the AuxUE's grid keeps
// the teacher's targets only where the teacher vouched for at least that
// share of the pixels it was asked about. An 8x4 frame that is its own
// 8x4 input, factor 2: eight 2x2 blocks. Block 0: 4 of 4 vouched (kept);
// block 1: 2 of 4 (kept at share 0.5, gone at 0.75); block 2: 1 of 4
// (gone: a sky block with one accepted pixel); block 3: 1 vouched, 2
// masked, 1 refused: 1 of the 2 asked (kept at 0.5); block 4: real ground
// truth on 3 pixels, the 4th refused (real stays, nothing to drop); the
// rest: nothing vouched.
func TestTeacherBlockGate(t *testing.T) {
	const W, H, factor = 8, 4, 2
	// pixel (x, y) is in block (y/2)*4 + x/2
	at := func(x, y int) int { return y*W + x }
	build := func() (*teacher, *dataset.Sample, LabelCounts) {
		tch := &teacher{mask: make([]bool, W*H)}
		for i := range tch.mask {
			tch.mask[i] = true
		}
		s := &dataset.Sample{Name: "blocks", Width: W, Height: H, Sparse: make([]float32, W*H)}
		tch.target = make([]float32, W*H)
		vouch := []int{at(0, 0), at(1, 0), at(0, 1), at(1, 1), // block 0
			at(2, 0), at(3, 1), // block 1
			at(4, 0), // block 2
			at(6, 0), // block 3 (and (7,0), (6,1) masked)
		}
		var lc LabelCounts
		for _, i := range vouch {
			tch.target[i] = 5
			lc.Teacher++
		}
		tch.mask[at(7, 0)], tch.mask[at(6, 1)] = false, false
		for _, i := range []int{at(0, 2), at(1, 2), at(0, 3)} { // block 4
			s.Sparse[i], tch.target[i] = 7, 7
			lc.Real++
		}
		return tch, s, lc
	}
	geo := infer.Fit(W, H, W, H, infer.ResizeStretch)
	for _, c := range []struct {
		share float64
		kept  []int // blocks whose teacher targets stay
	}{{0, []int{0, 1, 2, 3}}, {0.5, []int{0, 1, 3}}, {0.75, []int{0}}, {1, []int{0}}} {
		tch, s, lc := build()
		before := lc
		tch.cfg.BlockShare = c.share
		tch.blockGate(s, geo, factor, H/factor, W/factor, &lc)
		var dropped int64
		for y := range H {
			for x := range W {
				i, b := at(x, y), (y/2)*4+x/2
				want := float32(0)
				switch {
				case s.Sparse[i] > 0:
					want = 7
				case slices.Contains(c.kept, b):
					tb, _, _ := build()
					want = tb.target[i]
				}
				if tch.target[i] != want {
					t.Errorf("share %v: pixel (%d, %d) of block %d: target %v, want %v", c.share, x, y, b, tch.target[i], want)
				}
			}
		}
		tb, _, _ := build()
		for i := range tb.target {
			if tb.target[i] > 0 && s.Sparse[i] == 0 && tch.target[i] == 0 {
				dropped++
			}
		}
		if lc.Teacher != before.Teacher-dropped || lc.LowConfidence != dropped || lc.Real != before.Real {
			t.Errorf("share %v: counts %+v from %+v, %d dropped", c.share, lc, before, dropped)
		}
	}
}
