package export_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/pkg/mapgrid"
	"github.com/didoedge/didoedge/runtime/apps/export"
	"github.com/didoedge/didoedge/runtime/record"
)

// TestExportMaps records frames of 64x40 whose maps a 32x16 model
// computed (letterboxed; depth on a 16x8 grid, scale and K/S on 32x16) at
// the recorder's defaults (computed resolution, float16), exports every
// other frame with Maps, and reads the .npy files with NumPy: float32
// arrays of the frame's shape whose values are the frame-size maps
// inference made, within float16's relative rounding 2^-11 (the bilinear
// resampling keeps a relative bound on positive values).
func TestExportMaps(t *testing.T) {
	const fw, fh = 64, 40
	dir := t.TempDir()
	rec, err := record.New(record.Config{Mode: record.ModeContinuous, Dir: dir, Queue: 64}, record.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.SetCamera("front", record.Intrinsics{Width: fw, Height: fh, Fx: 50, Fy: 50, Cx: 31.5, Cy: 19.5}); err != nil {
		t.Fatal(err)
	}
	g := mapgrid.Fit(fw, fh, 32, 16, mapgrid.Letterbox)
	frameMaps := map[string][][]float32{} // per stream, per recorded frame
	t0 := time.Unix(1_800_000_000, 0)
	const n = 6
	for k := 1; k <= n; k++ {
		rng := rand.New(rand.NewPCG(uint64(k), 9))
		f := &record.Frame{Camera: "front", Seq: uint64(100 + k), Capture: t0.Add(time.Duration(k) * 66 * time.Millisecond),
			Width: fw, Height: fh, RGB: make([]uint8, 3*fw*fh), MapWidth: fw, MapHeight: fh,
			Computed: record.ComputedMaps{Grid: g, DepthWidth: 16, DepthHeight: 8, Depth: make([]float32, 16*8),
				AuxWidth: 32, AuxHeight: 16, Scale: make([]float32, 32*16), Epistemic: make([]float32, 32*16)}}
		for _, m := range []struct {
			name     string
			native   []float32
			w, h     int
			lo, span float32
		}{{"depth", f.Computed.Depth, 16, 8, 2, 78}, {"laplace_scale", f.Computed.Scale, 32, 16, 0.01, 3}, {"epistemic", f.Computed.Epistemic, 32, 16, 0.001, 0.999}} {
			for i := range m.native {
				m.native[i] = m.lo + m.span*rng.Float32()
			}
			full := make([]float32, fw*fh)
			if err := mapgrid.NewRemap(g, m.w, m.h).Apply(m.native, full); err != nil {
				t.Fatal(err)
			}
			frameMaps[m.name] = append(frameMaps[m.name], full)
		}
		if !rec.Frame(f) {
			t.Fatalf("frame %d dropped", k)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.mcap"))
	out := filepath.Join(t.TempDir(), "kitti")
	res, err := export.KITTI(ctx, files[0], export.Options{Dir: out, Drive: "d", Every: 2, Maps: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames != 3 || fmt.Sprint(res.Maps) != "map[depth:3 epistemic:3 laplace_scale:3]" {
		t.Fatalf("result %+v", res)
	}
	// NumPy prints, per file: stream, index, dtype, shape, then the values.
	const script = `import glob, os, sys
import numpy as np
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*", "*.npy"))):
    a = np.load(p)
    print(os.path.basename(os.path.dirname(p)), os.path.basename(p)[:-4], a.dtype, a.shape[0], a.shape[1], " ".join(repr(float(x)) for x in a.ravel()))`
	outp, err := exec.Command(testmodels.Python, "-c", script, filepath.Join(out, "d", export.MapsDir)).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, outp)
	}
	lines := strings.Split(strings.TrimSpace(string(outp)), "\n")
	if len(lines) != 9 {
		t.Fatalf("numpy read %d arrays, want 9:\n%.500s", len(lines), outp)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		index, _ := strconv.Atoi(f[1])
		if f[2] != "float32" || f[3] != strconv.Itoa(fh) || f[4] != strconv.Itoa(fw) || len(f) != 5+fw*fh {
			t.Fatalf("%s %s: %s (%s, %s) with %d values", f[0], f[1], f[2], f[3], f[4], len(f)-5)
		}
		want := frameMaps[f[0]][2*index] // exported frame i is recorded frame 2i
		for i, s := range f[5:] {
			v, _ := strconv.ParseFloat(s, 64)
			if math.Abs(v-float64(want[i])) > (1.0/2048+1e-6)*float64(want[i]) {
				t.Fatalf("%s frame %d pixel %d: %v, inference made %v", f[0], index, i, v, want[i])
			}
		}
	}
}
