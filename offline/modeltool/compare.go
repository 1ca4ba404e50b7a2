package modeltool

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// MapDiff is the worst disagreement of one map over all frames.
type MapDiff struct {
	Map string
	// MaxAbs is max |a - b| over every frame and pixel; Frame and Index locate it.
	MaxAbs       float64
	Frame, Index int
	// RefMaxAbs is max |a| over the same map of run A; MaxRel = MaxAbs / RefMaxAbs
	// (a relative figure that stays meaningful where single values are near 0).
	RefMaxAbs, MaxRel float64
	// NaNMismatch counts pixels that are NaN in one run and not the other.
	NaNMismatch int
}

// Comparison is the result of Compare.
type Comparison struct {
	A, B *Summary
	Tol  float64
	Maps []MapDiff
}

// OK reports whether every map agrees within Tol and no NaN differs.
func (c *Comparison) OK() bool {
	for _, m := range c.Maps {
		if m.MaxAbs > c.Tol || m.NaNMismatch > 0 {
			return false
		}
	}
	return true
}

// Compare reads two run directories and compares every map pixel by pixel.
// The runs must describe the same frames of the same models (same size,
// frame count, seed and model sha256); otherwise the comparison is
// meaningless and Compare returns an error.
func Compare(dirA, dirB string, tol float64) (*Comparison, error) {
	if !(tol >= 0) || math.IsInf(tol, 0) {
		return nil, fmt.Errorf("compare: tolerance %g must be finite and >= 0", tol)
	}
	a, err := ReadSummary(dirA)
	if err != nil {
		return nil, err
	}
	b, err := ReadSummary(dirB)
	if err != nil {
		return nil, err
	}
	if a.Height != b.Height || a.Width != b.Width || a.Frames != b.Frames || a.Seed != b.Seed {
		return nil, fmt.Errorf("compare %q and %q: runs differ in size (%dx%d vs %dx%d), frames (%d vs %d) or seed (%d vs %d)",
			dirA, dirB, a.Height, a.Width, b.Height, b.Width, a.Frames, b.Frames, a.Seed, b.Seed)
	}
	for _, role := range []string{"depth", "auxue"} {
		ma, mb := a.model(role), b.model(role)
		if ma.SHA256 != mb.SHA256 {
			return nil, fmt.Errorf("compare %q and %q: %s models differ (sha256 %q vs %q)", dirA, dirB, role, ma.SHA256, mb.SHA256)
		}
	}
	c := &Comparison{A: a, B: b, Tol: tol}
	n := a.Height * a.Width
	bufA, bufB := make([]float32, n), make([]float32, n)
	for _, name := range []string{MapDepth, MapScale, MapEpistemic} {
		d := MapDiff{Map: name}
		for f := range a.Frames {
			fa, fb := a.file(f, name), b.file(f, name)
			if err := readFloat32(filepath.Join(dirA, fa), bufA); err != nil {
				return nil, err
			}
			if err := readFloat32(filepath.Join(dirB, fb), bufB); err != nil {
				return nil, err
			}
			for i, va := range bufA {
				x, y := float64(va), float64(bufB[i])
				if math.IsNaN(x) || math.IsNaN(y) {
					if math.IsNaN(x) != math.IsNaN(y) {
						d.NaNMismatch++
					}
					continue
				}
				d.RefMaxAbs = math.Max(d.RefMaxAbs, math.Abs(x))
				if diff := math.Abs(x - y); diff > d.MaxAbs || math.IsNaN(diff) {
					d.MaxAbs, d.Frame, d.Index = diff, f, i
				}
			}
		}
		if d.RefMaxAbs > 0 {
			d.MaxRel = d.MaxAbs / d.RefMaxAbs
		}
		c.Maps = append(c.Maps, d)
	}
	return c, nil
}

// Write prints the comparison as a table.
func (c *Comparison) Write(w io.Writer) error {
	fmt.Fprintf(w, "A: %s, ONNX Runtime %s (%s), providers %s/%s\n", c.A.GOARCH, c.A.Library.Version, c.A.Library.Path,
		c.A.model("depth").Provider, c.A.model("auxue").Provider)
	fmt.Fprintf(w, "B: %s, ONNX Runtime %s (%s), providers %s/%s\n", c.B.GOARCH, c.B.Library.Version, c.B.Library.Path,
		c.B.model("depth").Provider, c.B.model("auxue").Provider)
	fmt.Fprintf(w, "%d frames of %dx%d, tolerance %g (max abs)\n", c.A.Frames, c.A.Height, c.A.Width, c.Tol)
	fmt.Fprintf(w, "%-10s %12s %12s %12s %6s %s\n", "map", "max_abs", "max|A|", "rel", "nan≠", "result")
	for _, m := range c.Maps {
		res := "ok"
		if m.MaxAbs > c.Tol || m.NaNMismatch > 0 {
			res = fmt.Sprintf("FAIL (worst at frame %d pixel %d)", m.Frame, m.Index)
		}
		fmt.Fprintf(w, "%-10s %12.3e %12.4g %12.3e %6d %s\n", m.Map, m.MaxAbs, m.RefMaxAbs, m.MaxRel, m.NaNMismatch, res)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// file names the file of one frame's map (validate guarantees it exists in
// the summary).
func (s *Summary) file(frame int, name string) string {
	for _, m := range s.Maps {
		if m.Frame == frame && m.Map == name {
			return m.File
		}
	}
	return ""
}

func readFloat32(path string, dst []float32) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	if len(data) != 4*len(dst) {
		return fmt.Errorf("compare: map %q has %d bytes, want %d (%d float32 values)", path, len(data), 4*len(dst), len(dst))
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return nil
}
