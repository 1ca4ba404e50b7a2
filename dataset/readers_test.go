package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// synth renders deterministic, exactly representable maps so that round
// trips can be compared bit for bit.
type synth struct {
	w, h    int
	opened  atomic.Int32
	failAt  int // frame index that fails (-1 none)
	started chan struct{}
	block   chan struct{}
}

type synthDrive struct {
	s    *synth
	seed int64
}

func (s *synth) OpenDrive(d Drive) (FrameRenderer, error) {
	s.opened.Add(1)
	return &synthDrive{s: s, seed: d.Seed}, nil
}

func synthFrame(w, h int, seed int64, index int) *Sample {
	n := w * h
	s := &Sample{Width: w, Height: h, RGB: make([]uint8, 3*n), Sparse: make([]float32, n), Dense: make([]float32, n), Semantic: make([]uint8, n)}
	for i := 0; i < n; i++ {
		k := (uint64(i)*31 + uint64(seed)*7 + uint64(index)*13) % (1 << 40)
		s.RGB[3*i], s.RGB[3*i+1], s.RGB[3*i+2] = uint8(k), uint8(k>>3), uint8(k>>5)
		if k%5 == 0 {
			s.Sparse[i] = float32(k%20000) / 256
		}
		s.Dense[i] = float32(k%65536) / 256
		s.Semantic[i] = uint8(k % 34)
	}
	return s
}

func (d *synthDrive) RenderFrame(index int, out *Sample) error {
	if d.s.started != nil {
		select {
		case d.s.started <- struct{}{}:
		default:
		}
		<-d.s.block
	}
	if index == d.s.failAt {
		return errors.New("synthetic failure")
	}
	*out = *synthFrame(d.s.w, d.s.h, d.seed, index)
	return nil
}

func synthMeta(drives int, count int) Meta {
	m := Meta{World: "outdoor", Seed: 5, Width: 24, Height: 10, Intrinsics: Intrinsics{Fx: 14, Fy: 13, Cx: 11.5, Cy: 4.5}, Semantic: "cityscapes", Sparse: "lidar-hdl64"}
	splits := AssignSplits(drives)
	for d := 0; d < drives; d++ {
		m.Drives = append(m.Drives, Drive{Name: fmt.Sprintf("outdoor_drive_%04d_sync", d), Seed: DriveSeed(5, d), Split: splits[d], First: 3, Count: count, Stride: 2})
	}
	return m
}

func TestGenerateAndReadBack(t *testing.T) {
	dir := t.TempDir()
	src := &synth{w: 24, h: 10, failAt: -1}
	var progress bytes.Buffer
	m := synthMeta(4, 5)
	if err := Generate(context.Background(), GenerateOptions{Dir: dir, Meta: m, Workers: 3, Progress: &progress}, src); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "rendered 20/20 frames") {
		t.Errorf("progress output %q lacks the final count", progress.String())
	}
	ds, err := OpenSim(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Meta.Counts["train"] != 10 || ds.Meta.Counts["val"] != 5 || ds.Meta.Counts["test"] != 5 {
		t.Errorf("counts %v", ds.Meta.Counts)
	}
	total := 0
	driveSplit := map[string]string{}
	for _, split := range SplitNames() {
		items, err := ds.Split(split)
		if err != nil {
			t.Fatal(err)
		}
		total += len(items)
		for _, it := range items {
			if prev, ok := driveSplit[it.Drive]; ok && prev != split {
				t.Fatalf("drive %s in splits %s and %s", it.Drive, prev, split)
			}
			driveSplit[it.Drive] = split
			s, err := ds.Load(it)
			if err != nil {
				t.Fatal(err)
			}
			var seed int64
			for _, d := range m.Drives {
				if d.Name == it.Drive {
					seed = d.Seed
				}
			}
			want := synthFrame(24, 10, seed, it.Frame)
			if !bytes.Equal(s.RGB, want.RGB) || !bytes.Equal(s.Semantic, want.Semantic) || !floatsEq(s.Sparse, want.Sparse) || !floatsEq(s.Dense, want.Dense) {
				t.Fatalf("%s: read back differs from what was written", s.Name)
			}
			if s.Intrinsics != m.Intrinsics {
				t.Fatalf("intrinsics %+v", s.Intrinsics)
			}
		}
	}
	if total != 20 {
		t.Fatalf("splits list %d frames, want 20", total)
	}
	// only RGB frames live in image_02/data
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(p)) == "data" {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			if _, _, _, err := readRGB(os.DirFS(dir), dir, filepath.ToSlash(rel)); err != nil {
				return fmt.Errorf("non-RGB file in data dir: %w", err)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, partialDir)); !os.IsNotExist(err) {
		t.Fatalf("temporary directory left behind: %v", err)
	}
}

func floatsEq(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestGenerateStopsOnError(t *testing.T) {
	dir := t.TempDir()
	src := &synth{w: 24, h: 10, failAt: 7}
	err := Generate(context.Background(), GenerateOptions{Dir: dir, Meta: synthMeta(2, 5), Workers: 2}, src)
	if err == nil || !strings.Contains(err.Error(), "synthetic failure") || !strings.Contains(err.Error(), "frame 7") {
		t.Fatalf("error %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, MetaFile)); err == nil {
		t.Fatal("meta.json written after a failure")
	}
}

func TestGenerateCancel(t *testing.T) {
	dir := t.TempDir()
	src := &synth{w: 24, h: 10, failAt: -1, started: make(chan struct{}, 1), block: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Generate(ctx, GenerateOptions{Dir: dir, Meta: synthMeta(3, 50), Workers: 2}, src)
	}()
	<-src.started
	cancel()
	close(src.block)
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, MetaFile)); err == nil {
		t.Fatal("meta.json written after cancellation")
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "image_02", "data", "*"))
	for _, m := range matches {
		if filepath.Ext(m) != ".png" {
			t.Fatalf("cancelled run left %s", m)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, partialDir)); !os.IsNotExist(err) {
		t.Fatalf("temporary directory left behind: %v", err)
	}
}

func TestSimReaderErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	if err := Generate(context.Background(), GenerateOptions{Dir: dir, Meta: synthMeta(1, 1)}, &synth{w: 24, h: 10, failAt: -1}); err != nil {
		t.Fatal(err)
	}
	ds, err := OpenSim(dir)
	if err != nil {
		t.Fatal(err)
	}
	it := Item{Drive: "outdoor_drive_0000_sync", Frame: 3}
	p := SimFramePaths(it.Drive, it.Frame)
	for _, rel := range []string{p.RGB, p.Sparse, p.Dense, p.Semantic} {
		path := filepath.Join(dir, rel)
		orig, _ := os.ReadFile(path)
		os.WriteFile(path, orig[:len(orig)*2/3], 0o644)
		_, err := ds.Load(it)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("truncated %s: error %v does not name the file", rel, err)
		}
		os.WriteFile(path, orig, 0o644)
	}
	if _, err := ds.Load(it); err != nil {
		t.Fatalf("restored files: %v", err)
	}
	// a frame of the wrong size
	var buf bytes.Buffer
	EncodeLabelPNG(&buf, 3, 3, make([]uint8, 9))
	os.WriteFile(filepath.Join(dir, p.Semantic), buf.Bytes(), 0o644)
	if _, err := ds.Load(it); err == nil || !strings.Contains(err.Error(), "3x3") {
		t.Errorf("wrong-size labels: %v", err)
	}
	// split lines naming a drive that is not in meta.json
	os.WriteFile(filepath.Join(dir, SplitsDir, "val.txt"), []byte("elsewhere_sync 1\n"), 0o644)
	if _, err := ds.Split("val"); err == nil || !strings.Contains(err.Error(), "elsewhere_sync") {
		t.Errorf("unknown drive in split: %v", err)
	}
	os.WriteFile(filepath.Join(dir, MetaFile), []byte(`{"format":`), 0o644)
	if _, err := OpenSim(dir); err == nil || !strings.Contains(err.Error(), MetaFile) {
		t.Errorf("truncated meta: %v", err)
	}
}

func writePNG(t *testing.T, path string, enc func(*bytes.Buffer) error) {
	t.Helper()
	var buf bytes.Buffer
	if err := enc(&buf); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestKITTIReader(t *testing.T) {
	root := t.TempDir()
	raw, gt := filepath.Join(root, "raw"), filepath.Join(root, "depth")
	drive := "2011_09_26/2011_09_26_drive_0002_sync"
	want := synthFrame(24, 10, 1, 69)
	writePNG(t, filepath.Join(raw, drive, "image_02", "data", "0000000069.png"), func(b *bytes.Buffer) error { return EncodeRGBPNG(b, 24, 10, want.RGB) })
	writePNG(t, filepath.Join(gt, "val", "2011_09_26_drive_0002_sync", "proj_depth", "groundtruth", "image_02", "0000000069.png"),
		func(b *bytes.Buffer) error { return EncodeDepthPNG(b, 24, 10, want.Sparse, 256) })
	calib := "calib_time: 09-Jan-2012 13:57:47\nP_rect_02: 7.215377e+02 0.000000e+00 6.095593e+02 4.485728e+01 0.000000e+00 7.215377e+02 1.728540e+02 2.163791e-01 0.000000e+00 0.000000e+00 1.000000e+00 2.745884e-03\n"
	os.WriteFile(filepath.Join(raw, "2011_09_26", "calib_cam_to_cam.txt"), []byte(calib), 0o644)

	list := drive + " 69 l\n" + drive + "/image_02/data/0000000069.png 2011_09_26_drive_0002_sync/proj_depth/groundtruth/image_02/0000000069.png 700\n"
	items, err := ParseSplitList(strings.NewReader(list), "eigen_test.txt")
	if err != nil {
		t.Fatal(err)
	}
	k := &KITTI{RawDir: raw, DepthDir: filepath.Join(gt, "val")}
	for i, it := range items {
		if i == 0 {
			k.DepthDir = gt // monodepth2 lines search train/ and val/
		} else {
			k.DepthDir = filepath.Join(gt, "val")
		}
		s, err := k.Load(it)
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		if !bytes.Equal(s.RGB, want.RGB) || !floatsEq(s.Sparse, want.Sparse) {
			t.Fatalf("item %d: maps differ", i)
		}
		if s.Intrinsics != (Intrinsics{Fx: 721.5377, Fy: 721.5377, Cx: 609.5593, Cy: 172.854}) {
			t.Fatalf("item %d: intrinsics %+v", i, s.Intrinsics)
		}
	}
	// missing ground truth names the paths it tried
	_, err = k.Load(Item{Drive: drive, Frame: 70, Side: 'l'})
	if err == nil || !strings.Contains(err.Error(), "0000000070.png") {
		t.Fatalf("missing frame: %v", err)
	}
	// a malformed calibration file names itself
	os.WriteFile(filepath.Join(raw, "2011_09_26", "calib_cam_to_cam.txt"), []byte("P_rect_02 1 2 3\n"), 0o644)
	k2 := &KITTI{RawDir: raw, DepthDir: gt}
	if _, err := k2.Load(items[0]); err == nil || !strings.Contains(err.Error(), "calib_cam_to_cam.txt") {
		t.Fatalf("bad calib: %v", err)
	}
}

func TestNYUReader(t *testing.T) {
	dir := t.TempDir()
	want := synthFrame(16, 12, 2, 0)
	mm := make([]float32, len(want.Dense))
	for i := range mm {
		mm[i] = float32(i%4000) / 1000
	}
	for _, name := range []string{"0001", "0002"} {
		writePNG(t, filepath.Join(dir, "rgb", name+".png"), func(b *bytes.Buffer) error { return EncodeRGBPNG(b, 16, 12, want.RGB) })
		writePNG(t, filepath.Join(dir, "depth", name+".png"), func(b *bytes.Buffer) error { return EncodeDepthPNG(b, 16, 12, mm, 1000) })
	}
	writePNG(t, filepath.Join(dir, "semantic", "0002.png"), func(b *bytes.Buffer) error { return EncodeLabelPNG(b, 16, 12, want.Semantic) })
	n := &NYU{Dir: dir}
	items, err := n.Items("")
	if err != nil || len(items) != 2 {
		t.Fatalf("items %v %v", items, err)
	}
	for _, it := range items {
		s, err := n.Load(it)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s.RGB, want.RGB) || !floatsEq(s.Sparse, mm) {
			t.Fatalf("%s: maps differ", it.RGBPath)
		}
		if (it.RGBPath == "0002") != (s.Semantic != nil) {
			t.Fatalf("%s: semantic presence wrong", it.RGBPath)
		}
		if want := 518.8579 * 16 / 640; s.Intrinsics.Fx != want {
			t.Fatalf("fx %v, want %v", s.Intrinsics.Fx, want)
		}
	}
	os.MkdirAll(filepath.Join(dir, SplitsDir), 0o755)
	os.WriteFile(filepath.Join(dir, SplitsDir, "test.txt"), []byte("0002\n\n../0001\n"), 0o644)
	if _, err := n.Items("test"); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("bad split line: %v", err)
	}
	// an 8-bit depth map is refused with the file named
	path := filepath.Join(dir, "depth", "0001.png")
	writePNG(t, path, func(b *bytes.Buffer) error { return EncodeLabelPNG(b, 16, 12, want.Semantic) })
	if _, err := n.Load(items[0]); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "16-bit") {
		t.Fatalf("8-bit depth: %v", err)
	}
}
