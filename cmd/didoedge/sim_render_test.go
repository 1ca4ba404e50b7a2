package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/dataset"
)

func simRenderEnv() (*cliEnv, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &cliEnv{stdout: &out, stderr: &errb, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, &out, &errb
}

func TestSimRenderWritesReadableDataSet(t *testing.T) {
	for _, world := range []string{sim.WorldOutdoor, sim.WorldIndoor} {
		dir := filepath.Join(t.TempDir(), world)
		env, out, _ := simRenderEnv()
		args := []string{"sim", "render", "--world", world, "--frames", "7", "--size", "48x160", "--seed", "4", "--workers", "2", "--out", dir}
		if code := run(context.Background(), env, args); code != 0 {
			t.Fatalf("%s: exit %d: %s", world, code, out.String())
		}
		ds, err := dataset.OpenSim(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ds.Meta.World != world || ds.Meta.Width != 160 || ds.Meta.Height != 48 || len(ds.Meta.Drives) != 3 {
			t.Fatalf("%s: meta %+v", world, ds.Meta)
		}
		n := 0
		for _, split := range dataset.SplitNames() {
			items, err := ds.Split(split)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) == 0 {
				t.Fatalf("%s: empty %s split", world, split)
			}
			for _, it := range items {
				s, err := ds.Load(it)
				if err != nil {
					t.Fatal(err)
				}
				n++
				// the files hold what the renderer produces, quantized
				var seed int64
				for _, d := range ds.Meta.Drives {
					if d.Name == it.Drive {
						seed = d.Seed
					}
				}
				r, _ := sim.NewRenderer(sim.Config{World: world, Width: 160, Height: 48, Seed: seed})
				f := sim.NewFrame(160, 48)
				if err := r.Render(it.Frame, f); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(s.RGB, f.RGB) || !bytes.Equal(s.Semantic, f.Semantic) {
					t.Fatalf("%s %s: RGB or labels differ from a fresh render", world, s.Name)
				}
				for i := range f.Sparse {
					if got, want := s.Sparse[i], float32(dataset.QuantizeDepth(f.Sparse[i], 256))/256; got != want {
						t.Fatalf("%s %s: sparse %v, want %v", world, s.Name, got, want)
					}
					if got, want := s.Dense[i], float32(dataset.QuantizeDepth(f.Depth[i], 256))/256; got != want {
						t.Fatalf("%s %s: dense %v, want %v", world, s.Name, got, want)
					}
				}
			}
		}
		if n != 7 {
			t.Fatalf("%s: %d frames in the splits, want 7", world, n)
		}
	}
}

func TestSimRenderFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--frames", "3"}, "--out"},
		{[]string{"--out", "x", "--size", "640"}, "--size"},
		{[]string{"--out", "x", "--size", "0x5"}, "--size"},
		{[]string{"--out", "x", "--world", "moon"}, "World"},
		{[]string{"--out", "x", "--frames", "0"}, "--frames"},
		{[]string{"--out", "x", "--frames", "2", "--drives", "3"}, "--drives"},
		{[]string{"--out", "x", "--camera", "fisheye"}, "--camera"},
	}
	for _, c := range cases {
		env, _, _ := simRenderEnv()
		err := runSimRender(context.Background(), env, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}

// `sim render --camera newcam` writes the new camera's frames at its 16:9
// default size, and meta.json carries its name and its intrinsics at that
// size: fx = fy = 560 * 0.5, the principal point (652.5, 371.5) scaled as a
// pixel centre, (653 * 0.5 - 0.5, 372 * 0.5 - 0.5).
func TestSimRenderNewCamera(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "newcam")
	env, out, _ := simRenderEnv()
	args := []string{"sim", "render", "--world", "outdoor", "--camera", "newcam", "--frames", "3", "--seed", "4", "--workers", "2", "--out", dir}
	if code := run(context.Background(), env, args); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	ds, err := dataset.OpenSim(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := ds.Meta
	if m.Camera != sim.CameraNewCam || m.Width != 640 || m.Height != 360 {
		t.Fatalf("meta camera %q size %dx%d, want newcam 640x360", m.Camera, m.Width, m.Height)
	}
	if in := m.Intrinsics; in.Fx != 280 || in.Fy != 280 || in.Cx != 326 || in.Cy != 185.5 {
		t.Fatalf("meta intrinsics %+v, want fx fy 280, cx 326, cy 185.5", in)
	}
	items, err := ds.Split("train")
	if err != nil || len(items) == 0 {
		t.Fatalf("train split: %v (%d items)", err, len(items))
	}
	s, err := ds.Load(items[0])
	if err != nil {
		t.Fatal(err)
	}
	var seed int64
	for _, d := range m.Drives {
		if d.Name == items[0].Drive {
			seed = d.Seed
		}
	}
	for _, c := range []struct {
		camera string
		same   bool
	}{{sim.CameraNewCam, true}, {sim.CameraKITTI, false}} {
		r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: 640, Height: 360, Seed: seed, Camera: c.camera})
		if err != nil {
			t.Fatal(err)
		}
		f := sim.NewFrame(640, 360)
		if err := r.Render(items[0].Frame, f); err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(s.RGB, f.RGB) != c.same {
			t.Errorf("frame on disk equal to a fresh %s render: %v, want %v", c.camera, !c.same, c.same)
		}
	}
}
