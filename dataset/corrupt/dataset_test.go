package corrupt

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTinyDataset builds a KITTI-like data set in dir: two sequences with
// RGB frames under image_02/data, 16-bit depth PNGs, a semantic PNG, split
// files and meta.json. It returns the frame and non-frame relative paths.
func writeTinyDataset(t *testing.T, dir string) (frames, others []string) {
	t.Helper()
	write := func(rel string, data []byte) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	encode := func(img image.Image) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	const w, h = 48, 20
	for si, seq := range []string{"2026_01_01_drive_0001_sync", "2026_01_01_drive_0002_sync"} {
		for f := 0; f < 3; f++ {
			rgb := roadScene(w+si, h) // sequences differ in size
			rel := filepath.Join(seq, "image_02", "data", []string{"0000000000.png", "0000000001.png", "0000000002.png"}[f])
			write(rel, encode(RGBToImage(rgb, w+si, h, nil)))
			frames = append(frames, rel)
			depth := image.NewGray16(image.Rect(0, 0, w+si, h))
			for i := range depth.Pix {
				depth.Pix[i] = uint8(i * 7)
			}
			drel := filepath.Join(seq, "proj_depth", "groundtruth", "image_02", filepath.Base(rel))
			write(drel, encode(depth))
			sem := image.NewGray(image.Rect(0, 0, w+si, h))
			sem.SetGray(1, 1, color.Gray{10})
			srel := filepath.Join(seq, "semantic", "data", filepath.Base(rel))
			write(srel, encode(sem))
			others = append(others, drel, srel)
		}
		ts := filepath.Join(seq, "image_02", "timestamps.txt")
		write(ts, []byte("2026-01-01 00:00:00.000\n"))
		others = append(others, ts)
	}
	write("splits/train.txt", []byte("2026_01_01_drive_0001_sync 0 l\n"))
	write("meta.json", []byte(`{"fx": 721.5, "baseline": 0.54}`))
	others = append(others, "splits/train.txt", "meta.json")
	return frames, others
}

func readRGB(t *testing.T, path string) ([]uint8, int, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ImageToRGB(img, nil)
}

func TestIsFrame(t *testing.T) {
	cases := map[string]bool{
		"seq/image_02/data/0000000000.png":          true,
		"image_02/data/x.PNG":                       true,
		"a/b/image_02/data/x.png":                   true,
		"seq/image_02/data/x.jpg":                   false,
		"seq/image_03/data/x.png":                   false,
		"seq/image_02/x.png":                        false,
		"seq/image_02/data/sub/x.png":               false,
		"seq/proj_depth/groundtruth/image_02/x.png": false,
		"seq/image_02/timestamps.txt":               false,
	}
	for rel, want := range cases {
		if got := IsFrame(rel); got != want {
			t.Errorf("IsFrame(%q) = %v, want %v", rel, got, want)
		}
	}
}

func TestCorruptDatasetSingle(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	frames, others := writeTinyDataset(t, in)
	var calls int
	stats, err := CorruptDataset(context.Background(), DatasetOptions{
		In: in, Out: out, Types: []string{"gaussian_noise"}, Severities: []int{3}, Seed: 5, Workers: 3,
		Progress: func(done, total int) {
			calls++
			if total != len(frames) || done < 1 || done > total {
				t.Errorf("progress %d/%d, want total %d", done, total, len(frames))
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Frames != len(frames) || stats.Copied != len(others) || calls != len(frames) {
		t.Fatalf("stats %+v, progress calls %d; want %d frames, %d copies", stats, calls, len(frames), len(others))
	}
	for _, rel := range others {
		a, _ := os.ReadFile(filepath.Join(in, rel))
		b, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s not copied byte-identical (err %v)", rel, err)
		}
	}
	for _, rel := range frames {
		src, w, h := readRGB(t, filepath.Join(in, rel))
		got, gw, gh := readRGB(t, filepath.Join(out, rel))
		if gw != w || gh != h {
			t.Fatalf("%s: size %dx%d, want %dx%d", rel, gw, gh, w, h)
		}
		want := make([]uint8, len(src))
		if err := Apply(want, src, w, h, "gaussian_noise", 3, FrameSeed(5, rel)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: output differs from Apply with the frame seed", rel)
		}
	}
	// No temporary files left behind.
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if strings.Contains(d.Name(), ".tmp-") || strings.Contains(d.Name(), ".link-") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
	// A re-run over the existing output succeeds and gives the same bytes.
	before, _ := os.ReadFile(filepath.Join(out, frames[0]))
	if _, err := CorruptDataset(context.Background(), DatasetOptions{
		In: in, Out: out, Types: []string{"gaussian_noise"}, Severities: []int{3}, Seed: 5,
	}); err != nil {
		t.Fatalf("re-run: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(out, frames[0]))
	if !bytes.Equal(before, after) {
		t.Error("re-run with the same seed changed a frame")
	}
}

func TestCorruptDatasetNested(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	frames, others := writeTinyDataset(t, in)
	types, sevs := []string{"contrast", "snow"}, []int{1, 5}
	stats, err := CorruptDataset(context.Background(), DatasetOptions{In: in, Out: out, Types: types, Severities: sevs, Nested: true})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Frames != len(frames)*4 || stats.Copied != len(others)*4 {
		t.Fatalf("stats %+v", stats)
	}
	for _, ty := range types {
		for _, s := range []string{"1", "5"} {
			for _, rel := range append(append([]string{}, frames...), others...) {
				if _, err := os.Stat(filepath.Join(out, ty, s, rel)); err != nil {
					t.Errorf("missing %s/%s/%s: %v", ty, s, rel, err)
				}
			}
		}
	}
	a, _, _ := readRGB(t, filepath.Join(out, "contrast", "1", frames[0]))
	b, _, _ := readRGB(t, filepath.Join(out, "contrast", "5", frames[0]))
	if bytes.Equal(a, b) {
		t.Error("severities 1 and 5 wrote identical frames")
	}
}

func TestCorruptDatasetErrors(t *testing.T) {
	in := t.TempDir()
	writeTinyDataset(t, in)
	bad := filepath.Join(in, "2026_01_01_drive_0001_sync", "image_02", "data", "0000000009.png")
	if err := os.WriteFile(bad, []byte("not a png"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := DatasetOptions{In: in, Out: filepath.Join(t.TempDir(), "o"), Types: []string{"fog"}, Severities: []int{2}}

	_, err := CorruptDataset(context.Background(), base)
	if err == nil || !strings.Contains(err.Error(), "0000000009.png") {
		t.Errorf("broken frame: error %v does not name the file", err)
	}

	o := base
	o.Out = filepath.Join(in, "inside")
	if _, err := CorruptDataset(context.Background(), o); err == nil || !strings.Contains(err.Error(), "inside input") {
		t.Errorf("output inside input: %v", err)
	}
	o = base
	o.Types = []string{"rain"}
	if _, err := CorruptDataset(context.Background(), o); err == nil || !strings.Contains(err.Error(), `"rain"`) {
		t.Errorf("unknown type: %v", err)
	}
	o = base
	o.In = filepath.Join(in, "missing")
	if _, err := CorruptDataset(context.Background(), o); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing input: %v", err)
	}
	o = base
	o.In = t.TempDir()
	if _, err := CorruptDataset(context.Background(), o); err == nil || !strings.Contains(err.Error(), "no frames") {
		t.Errorf("empty input: %v", err)
	}

	os.Remove(bad)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CorruptDataset(ctx, base); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: error %v, want context.Canceled", err)
	}
}
