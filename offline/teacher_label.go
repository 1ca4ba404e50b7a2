package offline

import (
	"fmt"
	"math"
	"slices"

	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/infer"
)

// minAlignPixels is the fewest reference pixels a relative teacher is
// aligned on.
const minAlignPixels = 16

// label writes the frame's target into t.target (metres; 0 = no target):
// the real ground truth where the frame has it, else the teacher's depth
// where the teacher can vouch for it. A relative teacher is first aligned
// by least squares in inverse depth (metrics.AlignInverseDepth), to the
// frame's real ground truth when it has at least minAlignPixels of it,
// else to the student's metric depth (studentFrame) on the pixels the
// teacher may label; student and teacher both relative need the former.
func (t *teacher) label(s *dataset.Sample, studentFrame []float32) (LabelCounts, error) {
	var lc LabelCounts
	n := s.Width * s.Height
	if t.mask != nil && (t.maskW != s.Width || t.maskH != s.Height) {
		return lc, fmt.Errorf("--teacher-mask %q is %dx%d, frame %s is %dx%d", t.cfg.Mask, t.maskW, t.maskH, s.Name, s.Width, s.Height)
	}
	t.target = slices.Grow(t.target[:0], n)[:n]
	real := s.Sparse
	nReal := 0
	for _, y := range real {
		if y > 0 {
			nReal++
		}
	}
	if nReal > 0 {
		lc.FramesWithGT = 1
	}
	td := t.depth
	if t.relative {
		ref := real
		if nReal < minAlignPixels {
			if t.studentRelative {
				return lc, fmt.Errorf("teacher: frame %s has %d pixels of ground truth and both the teacher and the student are relative: nothing metric to align the teacher to (use a metric teacher, or frames with some ground truth)", s.Name, nReal)
			}
			// The student's metric depth on the pixels the teacher may
			// label (inside the mask) is the scale reference.
			ref = t.unc[:0]
			ref = slices.Grow(ref, n)[:n]
			for i, d := range studentFrame {
				ref[i] = 0
				if (t.mask == nil || t.mask[i]) && d > 0 && float64(d) < t.cfg.MaxDepth {
					ref[i] = d
				}
			}
			t.unc = ref
		}
		a, err := metrics.AlignInverseDepth(t.depth, ref)
		if err != nil {
			return lc, fmt.Errorf("teacher: frame %s: %w", s.Name, err)
		}
		a.Apply(t.depth, t.depth, t.cfg.MaxDepth)
	}
	// The per-frame percentile of the confidence read-out u.
	cut := math.Inf(1)
	if t.conf != nil && t.cfg.ConfidenceDrop > 0 {
		u := t.unc[:0]
		for _, v := range t.conf {
			if v == v {
				u = append(u, v)
			}
		}
		t.unc = u
		if len(u) > 0 {
			slices.Sort(u)
			// Keep the ceil((1 - p) n) most confident: u up to the
			// value of that rank.
			k := int(math.Ceil((1 - t.cfg.ConfidenceDrop) * float64(len(u))))
			cut = float64(u[min(max(k-1, 0), len(u)-1)])
		}
	}
	// With a bound, a pixel without a confidence (NaN u) is one the
	// teacher does not vouch for.
	bounded := t.conf != nil && (t.cfg.MaxUncertainty > 0 || t.cfg.ConfidenceDrop > 0)
	for i := 0; i < n; i++ {
		t.target[i] = 0
		if real != nil && real[i] > 0 {
			t.target[i] = real[i]
			lc.Real++
			continue
		}
		d := float64(td[i])
		switch {
		case t.mask != nil && !t.mask[i]:
			lc.Masked++
		case !(d > 0 && d < t.cfg.MaxDepth):
			lc.BeyondRange++
		case bounded && (!(t.conf[i] == t.conf[i]) ||
			(t.cfg.MaxUncertainty > 0 && float64(t.conf[i]) > t.cfg.MaxUncertainty) || float64(t.conf[i]) > cut):
			lc.LowConfidence++
		default:
			t.target[i] = td[i]
			lc.Teacher++
		}
	}
	return lc, nil
}

// blockGate applies TeacherConfig.BlockShare to the frame's targets: in
// every block of the AuxUE's grid (factor x factor input pixels of the
// student, geo placing the frame in its input, gw blocks a row) where the
// teacher vouched for fewer than BlockShare of the pixels it was asked
// about (no real ground truth, inside the mask), its targets are removed
// and counted as LowConfidence. Real ground truth stays.
func (t *teacher) blockGate(s *dataset.Sample, geo infer.Geometry, factor, gh, gw int, lc *LabelCounts) {
	share := t.cfg.BlockShare
	if share <= 0 {
		return
	}
	g := gh * gw
	if len(t.asked) != 2*g {
		t.asked = make([]int32, 2*g)
	}
	clear(t.asked)
	asked, vouched := t.asked[:g], t.asked[g:]
	real := s.Sparse
	cell := func(x, y int) int {
		in := geo.InputPixel(x, y)
		if in < 0 {
			return -1
		}
		return (in/geo.InW/factor)*gw + (in%geo.InW)/factor
	}
	for y := 0; y < s.Height; y++ {
		for x := 0; x < s.Width; x++ {
			i := y*s.Width + x
			if (real != nil && real[i] > 0) || (t.mask != nil && !t.mask[i]) {
				continue
			}
			c := cell(x, y)
			if c < 0 {
				continue
			}
			asked[c]++
			if t.target[i] > 0 {
				vouched[c]++
			}
		}
	}
	for y := 0; y < s.Height; y++ {
		for x := 0; x < s.Width; x++ {
			i := y*s.Width + x
			if !(t.target[i] > 0) || (real != nil && real[i] > 0) {
				continue
			}
			if c := cell(x, y); c >= 0 && float64(vouched[c]) < share*float64(asked[c]) {
				t.target[i] = 0
				lc.Teacher--
				lc.LowConfidence++
			}
		}
	}
}
