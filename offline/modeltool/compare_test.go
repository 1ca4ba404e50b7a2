package modeltool

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRun writes a run directory with maps value(frame, map, i) without
// ONNX Runtime, so that Compare can be tested on known differences.
func writeRun(t *testing.T, dir string, s Summary, value func(f int, m string, i int) float32) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := s.Height * s.Width
	s.Maps = nil
	for f := range s.Frames {
		for _, m := range []string{MapDepth, MapScale, MapEpistemic} {
			name := fmt.Sprintf("frame%03d_%s.f32", f, m)
			buf := make([]byte, 0, 4*n)
			for i := range n {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(value(f, m, i)))
			}
			if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
				t.Fatal(err)
			}
			s.Maps = append(s.Maps, MapFile{Frame: f, Map: m, File: name})
		}
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func baseSummary() Summary {
	return Summary{Tool: "test", GOARCH: "amd64", Height: 4, Width: 6, Frames: 2, Seed: 1,
		Models: []ModelInfo{{Role: "depth", SHA256: "aa"}, {Role: "auxue", SHA256: "bb"}}}
}

// base gives every map distinct values, all exact in float32 (multiples of
// 2^-7), so that no rounding or FMA fusion (arm64) can move them; the
// largest |value| of a map is at frame 1, i = 23 (depth 1 + 0.5 + 23/128).
func base(f int, m string, i int) float32 {
	off := map[string]float32{MapDepth: 1, MapScale: 0.25, MapEpistemic: 0.0625}[m]
	return off + float32(f)*0.5 + float32(i)/128
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name    string
		perturb func(f int, m string, i int, v float32) float32
		tol     float64
		ok      bool
		check   func(t *testing.T, c *Comparison)
	}{
		{"identical", func(_ int, _ string, _ int, v float32) float32 { return v }, 1e-3, true,
			func(t *testing.T, c *Comparison) {
				for _, m := range c.Maps {
					if m.MaxAbs != 0 || m.NaNMismatch != 0 {
						t.Errorf("%s: %+v, want no difference", m.Map, m)
					}
				}
				if got := c.Maps[0].RefMaxAbs; math.Abs(got-float64(base(1, MapDepth, 23))) > 0 {
					t.Errorf("depth max|A| = %v, want %v", got, base(1, MapDepth, 23))
				}
			}},
		{"within tolerance", func(f int, m string, i int, v float32) float32 {
			if f == 1 && m == MapScale && i == 7 {
				return v + 5e-4
			}
			return v
		}, 1e-3, true, func(t *testing.T, c *Comparison) {
			d := c.Maps[1]
			want := float64(base(1, MapScale, 7)+5e-4) - float64(base(1, MapScale, 7))
			if d.Map != MapScale || d.MaxAbs != want || d.Frame != 1 || d.Index != 7 {
				t.Errorf("scale diff %+v, want max abs %v at frame 1 index 7", d, want)
			}
			if rel := want / float64(base(1, MapScale, 23)); math.Abs(d.MaxRel-rel) > 1e-12 {
				t.Errorf("scale rel %v, want %v", d.MaxRel, rel)
			}
		}},
		{"beyond tolerance", func(f int, m string, i int, v float32) float32 {
			if f == 0 && m == MapEpistemic && i == 3 {
				return v - 2e-3
			}
			return v
		}, 1e-3, false, func(t *testing.T, c *Comparison) {
			if d := c.Maps[2]; d.Frame != 0 || d.Index != 3 || d.MaxAbs < 1.9e-3 || d.MaxAbs > 2.1e-3 {
				t.Errorf("epistemic diff %+v, want about 2e-3 at frame 0 index 3", d)
			}
		}},
		{"NaN in one run only", func(f int, m string, i int, v float32) float32 {
			if f == 1 && m == MapDepth && i == 0 {
				return float32(math.NaN())
			}
			return v
		}, 1e-3, false, func(t *testing.T, c *Comparison) {
			if c.Maps[0].NaNMismatch != 1 {
				t.Errorf("depth NaN mismatches %d, want 1", c.Maps[0].NaNMismatch)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			writeRun(t, a, baseSummary(), base)
			writeRun(t, b, baseSummary(), func(f int, m string, i int) float32 { return tc.perturb(f, m, i, base(f, m, i)) })
			c, err := Compare(a, b, tc.tol)
			if err != nil {
				t.Fatal(err)
			}
			if c.OK() != tc.ok {
				t.Fatalf("OK() = %v, want %v: %+v", c.OK(), tc.ok, c.Maps)
			}
			tc.check(t, c)
			var sb strings.Builder
			if err := c.Write(&sb); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(sb.String(), "FAIL") == tc.ok {
				t.Errorf("table does not match OK() = %v:\n%s", tc.ok, sb.String())
			}
		})
	}
}

func TestCompareRefusesDifferentRuns(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *Summary)
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"other seed", func(s *Summary) { s.Seed = 2 }, nil, "seed"},
		{"other size", func(s *Summary) { s.Width = 8 }, nil, "size"},
		{"other depth model", func(s *Summary) { s.Models[0].SHA256 = "cc" }, nil, "depth models differ"},
		{"truncated map", nil, func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "frame001_scale.f32"), []byte{1, 2, 3}, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "frame001_scale.f32\" has 3 bytes"},
		{"missing summary", nil, func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, SummaryFile)); err != nil {
				t.Fatal(err)
			}
		}, SummaryFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			writeRun(t, a, baseSummary(), base)
			s := baseSummary()
			if tc.change != nil {
				tc.change(&s)
			}
			writeRun(t, b, s, base)
			if tc.damage != nil {
				tc.damage(t, b)
			}
			_, err := Compare(a, b, 1e-3)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compare error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Compare(t.TempDir(), t.TempDir(), math.NaN()); err == nil {
		t.Error("NaN tolerance accepted")
	}
}

func validSummaryJSON(t testing.TB) []byte {
	s := baseSummary()
	for f := range s.Frames {
		for _, m := range []string{MapDepth, MapScale, MapEpistemic} {
			s.Maps = append(s.Maps, MapFile{Frame: f, Map: m, File: fmt.Sprintf("frame%03d_%s.f32", f, m)})
		}
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseSummaryErrorsNameTheKey(t *testing.T) {
	valid := string(validSummaryJSON(t))
	tests := []struct {
		name, from, to, want string
	}{
		{"path traversal", `"frame001_scale.f32"`, `"../../etc/passwd"`, "maps[4].file"},
		{"unknown map", `"map":"scale"`, `"map":"sky"`, "maps[1].map"},
		{"frame out of range", `"frame":1,"map":"depth"`, `"frame":2,"map":"depth"`, "maps[3].frame"},
		{"unknown key", `"tool"`, `"tul"`, "unknown field \"tul\""},
		{"zero height", `"height":4`, `"height":0`, "height 0"},
		{"bad role", `"role":"auxue"`, `"role":"main"`, "models[1].role"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := strings.Replace(valid, tc.from, tc.to, 1)
			if data == valid {
				t.Fatalf("%q not found in the valid summary", tc.from)
			}
			_, err := ParseSummary([]byte(data), "x/summary.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "x/summary.json") {
				t.Fatalf("ParseSummary error = %v, want one naming the file and %q", err, tc.want)
			}
		})
	}
	if _, err := ParseSummary([]byte(valid), "ok"); err != nil {
		t.Fatalf("valid summary rejected: %v", err)
	}
}

func FuzzParseSummary(f *testing.F) {
	valid := validSummaryJSON(f)
	f.Add(valid)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"height":4,"width":6,"frames":1,"maps":[{"frame":0,"map":"depth","file":"frame000_depth.f32"}]}`))
	f.Add([]byte(`{"height":99999999,"width":99999999,"frames":1}`))
	f.Add(append(append([]byte{}, valid...), []byte(` {}`)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSummary(data, "fuzz")
		if err != nil {
			return
		}
		if s.Height*s.Width > maxMapValues || len(s.Maps) != 3*s.Frames {
			t.Fatalf("accepted a summary that breaks the invariants: %+v", s)
		}
		for _, m := range s.Maps {
			if filepath.Base(m.File) != m.File || !strings.HasSuffix(m.File, ".f32") {
				t.Fatalf("accepted file name %q", m.File)
			}
		}
	})
}
