package dataset

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// mapFS copies the tree under dir into memory: an fs.FS that is not a
// directory, as an S3 prefix is not.
func mapFS(t *testing.T, dir string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		m[filepath.ToSlash(rel)] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLayoutsThroughFS reads each layout from its directory and from an
// in-memory copy given as Source.FS: the same items and samples, and
// errors that name the file under the source's own name.
func TestLayoutsThroughFS(t *testing.T) {
	simDir := t.TempDir()
	if err := Generate(context.Background(), GenerateOptions{Dir: simDir, Meta: synthMeta(3, 2), Workers: 1}, &synth{w: 24, h: 10, failAt: -1}); err != nil {
		t.Fatal(err)
	}
	nyuDir := t.TempDir()
	f := synthFrame(16, 12, 2, 0)
	for _, name := range []string{"0001", "0002", "0003"} {
		writePNG(t, filepath.Join(nyuDir, "rgb", name+".png"), func(b *bytes.Buffer) error { return EncodeRGBPNG(b, 16, 12, f.RGB) })
		writePNG(t, filepath.Join(nyuDir, "depth", name+".png"), func(b *bytes.Buffer) error { return EncodeDepthPNG(b, 16, 12, f.Dense, 1000) })
	}
	writePNG(t, filepath.Join(nyuDir, "semantic", "0002.png"), func(b *bytes.Buffer) error { return EncodeLabelPNG(b, 16, 12, f.Semantic) })
	kittiDir := t.TempDir()
	drive := "2011_09_26/2011_09_26_drive_0002_sync"
	writePNG(t, filepath.Join(kittiDir, drive, "image_02", "data", "0000000069.png"), func(b *bytes.Buffer) error { return EncodeRGBPNG(b, 24, 10, synthFrame(24, 10, 1, 69).RGB) })
	writePNG(t, filepath.Join(kittiDir, "val", "2011_09_26_drive_0002_sync", "proj_depth", "groundtruth", "image_02", "0000000069.png"),
		func(b *bytes.Buffer) error { return EncodeDepthPNG(b, 24, 10, synthFrame(24, 10, 1, 69).Sparse, 256) })
	os.WriteFile(filepath.Join(kittiDir, "2011_09_26", "calib_cam_to_cam.txt"), []byte("P_rect_02: 721 0 609 44 0 721 172 0.2 0 0 1 0.003\n"), 0o644)
	os.MkdirAll(filepath.Join(kittiDir, SplitsDir), 0o755)
	os.WriteFile(filepath.Join(kittiDir, SplitsDir, "eigen.txt"), []byte(drive+" 69 l\n"), 0o644)

	for _, tc := range []struct {
		name, dir, split, layout, missing string
	}{
		{"sim", simDir, SplitAll, LayoutSim, "image_02/data"},
		{"nyu", nyuDir, SplitAll, LayoutNYU, "rgb/0001.png"},
		{"kitti", kittiDir, "eigen", LayoutKITTI, "image_02/data/0000000069.png"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local, err := Open(Source{Dir: tc.dir})
			if err != nil {
				t.Fatal(err)
			}
			mem := mapFS(t, tc.dir)
			remote, err := Open(Source{Dir: "mem://bucket/" + tc.name, FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			if local.Layout() != tc.layout || remote.Layout() != tc.layout {
				t.Fatalf("layouts %s and %s, want %s", local.Layout(), remote.Layout(), tc.layout)
			}
			li, err := local.Items(tc.split)
			if err != nil {
				t.Fatal(err)
			}
			ri, err := remote.Items(tc.split)
			if err != nil {
				t.Fatal(err)
			}
			if len(li) == 0 || !reflect.DeepEqual(li, ri) {
				t.Fatalf("items differ: %v and %v", li, ri)
			}
			for _, it := range li {
				a, err := local.Load(it)
				if err != nil {
					t.Fatal(err)
				}
				b, err := remote.Load(it)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("%s: samples differ", a.Name)
				}
			}
			// a missing file is named under the source's name, and is
			// still fs.ErrNotExist
			for k := range mem {
				if strings.Contains(k, tc.missing) {
					delete(mem, k)
				}
			}
			var loadErr error
			for _, it := range li {
				if _, loadErr = remote.Load(it); loadErr != nil {
					break
				}
			}
			if loadErr == nil || !strings.Contains(loadErr.Error(), "mem://bucket/"+tc.name+"/") || !errors.Is(loadErr, fs.ErrNotExist) {
				t.Fatalf("missing file: %v", loadErr)
			}
		})
	}
}
