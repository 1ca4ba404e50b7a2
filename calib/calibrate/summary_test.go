package calibrate

import (
	"bytes"
	"strings"
	"testing"
)

// TestSummaryAlignmentLine: a relative model's frames are said to be
// aligned to their ground truth only when they have some.
func TestSummaryAlignmentLine(t *testing.T) {
	for _, c := range []struct {
		relative, noGT bool
		aligned        bool
	}{{true, false, true}, {true, true, false}, {false, false, false}, {false, true, false}} {
		var b bytes.Buffer
		r := &Result{Relative: c.relative, NoGroundTruth: c.noGT, Split: "val", TargetFAR: 0.01}
		r.WriteSummary(&b)
		if got := strings.Contains(b.String(), "aligned to their ground truth"); got != c.aligned {
			t.Errorf("relative %v, no ground truth %v: says aligned %v, want %v:\n%s", c.relative, c.noGT, got, c.aligned, b.String())
		}
	}
}
