package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func mustRender(t *testing.T, cfg Config, index int) (*Renderer, *Frame) {
	t.Helper()
	r, err := NewRenderer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFrame(cfg.Width, cfg.Height)
	if err := r.Render(index, f); err != nil {
		t.Fatal(err)
	}
	return r, f
}

func outdoorCfg(seed int64) Config {
	return Config{World: WorldOutdoor, Width: DefaultWidth, Height: DefaultHeight, Seed: seed}
}

func indoorCfg(seed int64) Config {
	return Config{World: WorldIndoor, Width: DefaultWidth, Height: DefaultHeight, Seed: seed}
}

func TestConfigValidation(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" = valid
	}{
		{"outdoor", Config{World: "outdoor", Width: 640, Height: 192}, ""},
		{"indoor odd size", Config{World: "indoor", Width: 33, Height: 7, Seed: -4}, ""},
		{"unknown world", Config{World: "mars", Width: 640, Height: 192}, "World"},
		{"empty world", Config{Width: 640, Height: 192}, "World"},
		{"zero width", Config{World: "outdoor", Width: 0, Height: 192}, "Width"},
		{"negative height", Config{World: "outdoor", Width: 640, Height: -1}, "Height"},
		{"negative fog", Config{World: "outdoor", Width: 64, Height: 64, Fog: -1}, "Fog"},
		{"negative parallelism", Config{World: "outdoor", Width: 64, Height: 64, Parallelism: -2}, "Parallelism"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewRenderer(c.cfg)
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
}

func TestIntrinsicsScaleKITTI(t *testing.T) {
	r, err := NewRenderer(Config{World: WorldOutdoor, Width: KITTIWidth, Height: KITTIHeight})
	if err != nil {
		t.Fatal(err)
	}
	fx, fy, cx, cy := r.Intrinsics()
	for _, c := range []struct{ got, want float64 }{{fx, kittiFx}, {fy, kittiFy}, {cx, kittiCx}, {cy, kittiCy}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("native-size intrinsics %v, want %v", c.got, c.want)
		}
	}
	r, _ = NewRenderer(outdoorCfg(0))
	fx, _, _, _ = r.Intrinsics()
	if want := kittiFx * 640 / 1242; math.Abs(fx-want) > 1e-9 {
		t.Errorf("fx at 640 wide = %v, want %v", fx, want)
	}
}

// Road pixels always see the flat ground (objects carry their own classes),
// so their depth must be the closed form z = h * fy / (v - cy).
func TestGroundPlaneDepthClosedForm(t *testing.T) {
	for _, size := range [][2]int{{192, 640}, {375, 1242}, {97, 211}} {
		for seed := int64(0); seed < 3; seed++ {
			cfg := Config{World: WorldOutdoor, Width: size[1], Height: size[0], Seed: seed}
			r, f := mustRender(t, cfg, int(seed)*37)
			fx, fy, cx, cy := r.Intrinsics()
			_ = fx
			_ = cx
			h := r.CameraHeight(f.Index)
			n := 0
			for v := 0; v < f.Height; v++ {
				for u := 0; u < f.Width; u++ {
					i := v*f.Width + u
					if f.Semantic[i] != ClassRoad {
						continue
					}
					want := h * fy / (float64(v) - cy)
					if got := float64(f.Depth[i]); math.Abs(got-want) > 1e-3*want {
						t.Fatalf("%v seed %d: depth at (%d,%d) = %v, closed form %v", size, seed, u, v, got, want)
					}
					n++
				}
			}
			if n < f.Width*f.Height/20 {
				t.Fatalf("%v seed %d: only %d road pixels checked", size, seed, n)
			}
		}
	}
}

func TestSparseGroundTruth(t *testing.T) {
	r, err := NewRenderer(outdoorCfg(0))
	if err != nil {
		t.Fatal(err)
	}
	f := NewFrame(DefaultWidth, DefaultHeight)
	for seed := int64(0); seed < 6; seed++ {
		r, err = NewRenderer(outdoorCfg(seed))
		if err != nil {
			t.Fatal(err)
		}
		for _, idx := range []int{0, 13, 150} {
			if err := r.Render(idx, f); err != nil {
				t.Fatal(err)
			}
			n, sky := 0, 0
			for i, s := range f.Sparse {
				if f.Semantic[i] == ClassSky {
					sky++
				}
				if s == 0 {
					continue
				}
				n++
				if f.Semantic[i] == ClassSky {
					t.Fatalf("seed %d frame %d: sparse depth %v on a sky pixel %d", seed, idx, s, i)
				}
				if s > lidarMaxRange || s < near {
					t.Fatalf("seed %d frame %d: sparse depth %v outside the LiDAR range", seed, idx, s)
				}
				if d := f.Depth[i]; math.Abs(float64(s-d)) > 0.1*float64(d)+1e-6 {
					t.Fatalf("seed %d frame %d: sparse %v disagrees with dense %v", seed, idx, s, d)
				}
			}
			if sky == 0 {
				t.Fatalf("seed %d frame %d: no sky pixels", seed, idx)
			}
			density := float64(n) / float64(len(f.Sparse))
			if density < 0.03 || density > 0.08 {
				t.Errorf("seed %d frame %d: sparse density %.4f, want 3%%..8%%", seed, idx, density)
			}
		}
	}
}

func TestDeterminism(t *testing.T) {
	for _, world := range []string{WorldOutdoor, WorldIndoor} {
		cfg := Config{World: world, Width: 320, Height: 96, Seed: 42}
		_, a := mustRender(t, cfg, 77)
		cfg1 := cfg
		cfg1.Parallelism = 1
		_, b := mustRender(t, cfg1, 77)
		cfg3 := cfg
		cfg3.Parallelism = 3
		_, c := mustRender(t, cfg3, 77)
		for _, o := range []*Frame{b, c} {
			if !bytes.Equal(a.RGB, o.RGB) || !bytes.Equal(a.Semantic, o.Semantic) || !floatsEqual(a.Depth, o.Depth) || !floatsEqual(a.Sparse, o.Sparse) {
				t.Fatalf("%s: same seed and index gave different frames", world)
			}
		}
		other := cfg
		other.Seed = 43
		_, d := mustRender(t, other, 77)
		if bytes.Equal(a.RGB, d.RGB) || floatsEqual(a.Depth, d.Depth) {
			t.Fatalf("%s: seeds 42 and 43 gave identical frames", world)
		}
		// re-rendering an earlier index into a used frame gives the same bytes
		r, e := mustRender(t, cfg, 5)
		if err := r.Render(77, e); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.RGB, e.RGB) || !floatsEqual(a.Sparse, e.Sparse) {
			t.Fatalf("%s: frame depends on the previously rendered frame", world)
		}
	}
}

func floatsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestConsecutiveFramesMoveForward(t *testing.T) {
	r, _ := NewRenderer(outdoorCfg(3))
	w := r.out
	for i := 0; i < 5; i++ {
		dz := w.cameraZ(i+1) - w.cameraZ(i)
		if dz < 0.8 || dz > 1.2 {
			t.Fatalf("ego moves %v m per frame, want about 1", dz)
		}
	}
}

func TestIndoorDepthRange(t *testing.T) {
	for seed := int64(0); seed < 4; seed++ {
		r, err := NewRenderer(indoorCfg(seed))
		if err != nil {
			t.Fatal(err)
		}
		f := NewFrame(DefaultWidth, DefaultHeight)
		for _, idx := range []int{0, 59, 60, 200} {
			if err := r.Render(idx, f); err != nil {
				t.Fatal(err)
			}
			lo, hi := math.Inf(1), 0.0
			valid := 0
			for i, d := range f.Depth {
				if f.Semantic[i] == ClassSky {
					t.Fatalf("indoor frame has id 23 (sky) at %d", i)
				}
				if d < 0.5 || d > 10 {
					t.Fatalf("seed %d frame %d: depth %v outside 0.5..10 m at pixel %d", seed, idx, d, i)
				}
				lo, hi = math.Min(lo, float64(d)), math.Max(hi, float64(d))
				if s := f.Sparse[i]; s != 0 {
					valid++
					if s != d {
						t.Fatalf("structured-light depth %v differs from dense %v", s, d)
					}
				}
			}
			if hi-lo < 2 {
				t.Errorf("seed %d frame %d: depth spans only %v..%v m", seed, idx, lo, hi)
			}
			if fr := float64(valid) / float64(len(f.Depth)); fr < 0.6 || fr > 0.99 {
				t.Errorf("seed %d frame %d: structured-light density %.3f, want 0.6..0.99", seed, idx, fr)
			}
		}
	}
}

func TestSemanticClassesPresent(t *testing.T) {
	cases := []struct {
		cfg  Config
		want []uint8
	}{
		{outdoorCfg(0), []uint8{ClassRoad, ClassSidewalk, ClassBuilding, ClassPole, ClassVegetation, ClassSky, ClassCar}},
		{indoorCfg(0), []uint8{ClassNYUWall, ClassNYUFloor}},
	}
	for _, c := range cases {
		r, err := NewRenderer(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		f := NewFrame(c.cfg.Width, c.cfg.Height)
		seen := map[uint8]int{}
		for idx := 0; idx < 400; idx += 40 {
			if err := r.Render(idx, f); err != nil {
				t.Fatal(err)
			}
			for _, s := range f.Semantic {
				seen[s]++
			}
		}
		for _, id := range c.want {
			if seen[id] == 0 {
				t.Errorf("%s: class %d never rendered (seen %v)", c.cfg.World, id, seen)
			}
		}
		if c.cfg.World == WorldIndoor && len(seen) < 6 {
			t.Errorf("indoor: only %d classes in 10 frames: %v", len(seen), seen)
		}
	}
}

func TestRenderRejectsMismatchedFrame(t *testing.T) {
	r, _ := NewRenderer(outdoorCfg(0))
	for _, f := range []*Frame{nil, NewFrame(10, 10), {Width: 640, Height: 192}} {
		if err := r.Render(0, f); err == nil {
			t.Errorf("Render accepted a %+v frame", f)
		}
	}
	if err := r.Render(-1, NewFrame(640, 192)); err == nil {
		t.Error("Render accepted a negative index")
	}
}

func TestRenderDoesNotAllocate(t *testing.T) {
	for _, world := range []string{WorldOutdoor, WorldIndoor} {
		r, _ := NewRenderer(Config{World: world, Width: 160, Height: 48, Seed: 9})
		f := NewFrame(160, 48)
		idx := 0
		allocs := testing.AllocsPerRun(20, func() {
			if err := r.Render(idx, f); err != nil {
				t.Fatal(err)
			}
			idx += 7
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per frame", world, allocs)
		}
	}
}

// The primitive buffer is sized from the generators' worst case; this checks
// the bound over many frames and seeds (add silently drops past capacity).
func TestPrimitiveCapacityNeverReached(t *testing.T) {
	for _, c := range []Config{{World: WorldOutdoor}, {World: WorldIndoor}, {World: WorldOutdoor, Obstacles: true}} {
		world := c.World
		for seed := int64(0); seed < 5; seed++ {
			c.Width, c.Height, c.Seed = 8, 4, seed
			r, _ := NewRenderer(c)
			f := NewFrame(8, 4)
			most := 0
			for idx := 0; idx < 3000; idx += 11 {
				if err := r.Render(idx, f); err != nil {
					t.Fatal(err)
				}
				most = max(most, len(r.sc.prims))
			}
			if most >= cap(r.sc.prims) {
				t.Fatalf("%s seed %d: %d primitives reached the capacity %d", world, seed, most, cap(r.sc.prims))
			}
		}
	}
}

// A LiDAR return on open road lies on the ground, so its depth z and column
// give the elevation of the beam that produced it:
// tan(e) = -hL / (z * sqrt(1 + du^2)). Every such elevation must be one of
// the 64 HDL-64E-like beams (spacing >= 0.32 deg; tolerance 0.03 deg covers
// the sub-pixel azimuth and float32 rounding).
func TestLidarReturnsComeFromTheBeams(t *testing.T) {
	var beams []float64
	for i := 0; i < 32; i++ {
		beams = append(beams, 2.0+(-8.33-2.0)*float64(i)/31, -8.83+(-24.8+8.83)*float64(i)/31)
	}
	for seed := int64(0); seed < 3; seed++ {
		r, f := mustRender(t, outdoorCfg(seed), 40)
		fx, _, cx, _ := r.Intrinsics()
		W := f.Width
		checked := 0
		used := map[int]bool{}
		for v := 1; v < f.Height-1; v++ {
			for u := 1; u < W-1; u++ {
				i := v*W + u
				z := float64(f.Sparse[i])
				if z == 0 {
					continue
				}
				open := true
				for dv := -1; dv <= 1; dv++ {
					for dx := -1; dx <= 1; dx++ {
						open = open && f.Semantic[i+dv*W+dx] == ClassRoad
					}
				}
				if !open {
					continue
				}
				du := (float64(u) - cx) / fx
				e := math.Atan(-lidarHeight/(z*math.Sqrt(1+du*du))) * 180 / math.Pi
				best, bi := math.Inf(1), -1
				for k, b := range beams {
					if d := math.Abs(e - b); d < best {
						best, bi = d, k
					}
				}
				if best > 0.03 {
					t.Fatalf("seed %d: road return at (%d,%d) z=%v implies elevation %.3f deg, %.3f from the nearest beam", seed, u, v, z, e, best)
				}
				used[bi] = true
				checked++
			}
		}
		if checked < 500 || len(used) < 30 {
			t.Fatalf("seed %d: only %d road returns from %d beams checked", seed, checked, len(used))
		}
	}
}

func TestFogChangesOnlyTheImage(t *testing.T) {
	clear := Config{World: WorldOutdoor, Width: 160, Height: 48, Seed: 2}
	foggy := clear
	foggy.Fog = 0.05
	_, a := mustRender(t, clear, 10)
	_, b := mustRender(t, foggy, 10)
	if !floatsEqual(a.Depth, b.Depth) || !floatsEqual(a.Sparse, b.Sparse) || !bytes.Equal(a.Semantic, b.Semantic) {
		t.Fatal("fog changed depth, ground truth or labels")
	}
	// fog pulls distant pixels toward the haze colour: contrast drops
	if contrast(b.RGB) >= contrast(a.RGB) {
		t.Fatalf("fog did not reduce contrast: %v vs %v", contrast(b.RGB), contrast(a.RGB))
	}
}

func contrast(rgb []uint8) float64 {
	var s, s2 float64
	for _, c := range rgb {
		s += float64(c)
		s2 += float64(c) * float64(c)
	}
	n := float64(len(rgb))
	return s2/n - (s/n)*(s/n)
}

// TestObstaclesOnTheEgoLane: with Obstacles the ego lane holds crates and
// fallen trees as real geometry: below the horizon in the lane's central
// columns, obstacle pixels are nearer than the road plane at their row
// (z = h fy / (v - cy)), and their world z lies at an obstacle slot (a
// multiple of 35 m; crowns reach 1.6 m before it). Indoors it is refused.
func TestObstaclesOnTheEgoLane(t *testing.T) {
	if _, err := NewRenderer(Config{World: WorldIndoor, Width: 64, Height: 32, Obstacles: true}); err == nil {
		t.Fatal("indoor obstacles accepted")
	}
	const w, h = 320, 96
	r, err := NewRenderer(Config{World: WorldOutdoor, Width: w, Height: h, Seed: 3, Obstacles: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := NewRenderer(Config{World: WorldOutdoor, Width: w, Height: h, Seed: 3})
	f, g := NewFrame(w, h), NewFrame(w, h)
	_, fy, _, cy := r.Intrinsics()
	seen := map[uint8]bool{}
	for idx := 0; idx < 80; idx += 4 {
		if err := r.Render(idx, f); err != nil {
			t.Fatal(err)
		}
		if err := plain.Render(idx, g); err != nil {
			t.Fatal(err)
		}
		camZ := r.out.cameraZ(idx)
		for u := w/2 - 20; u < w/2+20; u++ {
			for v := h - 1; v > int(cy)+2; v-- {
				i := v*w + u
				c := f.Semantic[i]
				if c != ClassStatic && (c != ClassVegetation || g.Semantic[i] == ClassVegetation) {
					continue
				}
				seen[c] = true
				road := outdoorCameraHeight * fy / (float64(v) - cy)
				d := float64(f.Depth[i])
				slot := math.Mod(camZ+d+2, obstacleEvery) - 2 // distance past the nearest slot
				if d > road*1.001 || slot < -1.7 || slot > 2 {
					t.Fatalf("frame %d pixel (%d,%d): obstacle depth %.2f m (world z %.1f), road plane %.2f m, without obstacles %.2f m",
						idx, u, v, d, camZ+d, road, g.Depth[i])
				}
			}
		}
	}
	if !seen[ClassStatic] || !seen[ClassVegetation] {
		t.Fatalf("obstacle classes seen in the lane: %v, want crates (%d) and a fallen tree (%d)", seen, ClassStatic, ClassVegetation)
	}
}

// TestHeadingShiftsTheView: a heading of atan(s/fx) moves the principal
// point by s pixels, so the ray of column u of the turned camera is the
// ray of column u+s of the forward camera: their depths (z along the
// road, as the forward camera measures it) agree column for column.
func TestHeadingShiftsTheView(t *testing.T) {
	const w, h, s = 160, 48, 24
	fwd := Config{World: WorldOutdoor, Width: w, Height: h, Seed: 3}
	r0, f0 := mustRender(t, fwd, 40)
	fx, _, cx0, _ := r0.Intrinsics()
	turned := fwd
	turned.Heading = math.Atan(s/fx) * 180 / math.Pi
	r1, f1 := mustRender(t, turned, 40)
	_, _, cx1, _ := r1.Intrinsics()
	if math.Abs(cx0-cx1-s) > 1e-9 {
		t.Fatalf("principal point %v -> %v, want a shift of %d", cx0, cx1, s)
	}
	var n, agree int
	for v := range h {
		for u := 0; u+s < w; u++ {
			a, b := f1.Depth[v*w+u], f0.Depth[v*w+u+s]
			if a == 0 && b == 0 {
				continue
			}
			n++
			if math.Abs(float64(a-b)) <= 1e-3*float64(b) {
				agree++
			}
		}
	}
	if n == 0 || float64(agree) < 0.99*float64(n) {
		t.Fatalf("%d of %d shifted depths agree, want 99%%", agree, n)
	}
	if _, err := NewRenderer(Config{World: WorldOutdoor, Width: w, Height: h, Heading: 50}); err == nil || !strings.Contains(err.Error(), "Heading") {
		t.Fatalf("heading 50: %v, want an error naming Heading", err)
	}
}
