package offline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/offline/depthnet"
	"github.com/didoedge/didoedge/offline/depthtrain"
)

// writePNG writes one PNG through enc.
func writeTestPNG(t *testing.T, path string, enc func(f *os.File) error) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAuxTrainOnKITTIAndNYULayouts: train auxue reads real KITTI's layout
// (raw frames under <date>/<drive>/image_02/data, the annotated depth
// under train/<drive>/proj_depth/groundtruth, an Eigen-style split file,
// calib_cam_to_cam.txt) and the NYU layout (rgb/, depth/ in millimetres),
// built here from simulated frames, and caches every frame of the split.
func TestAuxTrainOnKITTIAndNYULayouts(t *testing.T) {
	const W, H = 64, 32
	dir := t.TempDir()
	net, err := depthnet.New(depthnet.Config{Height: H, MaxDepth: 80, Width: 1, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	model, spec, err := WriteDepthArtifacts(net, dir, "depth", W)
	if err != nil {
		t.Fatal(err)
	}
	src, err := depthtrain.NewSimSource(31, 2, 10, W, H)
	if err != nil {
		t.Fatal(err)
	}
	raw, depthRoot, nyu := filepath.Join(dir, "kitti_raw"), filepath.Join(dir, "kitti_depth"), filepath.Join(dir, "nyu")
	const date, drive = "2011_09_26", "2011_09_26_drive_0001_sync"
	if err := os.MkdirAll(filepath.Join(raw, date), 0o755); err != nil {
		t.Fatal(err)
	}
	calib := "calib_time: 09-Jan-2012 13:57:47\nP_rect_02: 72.0 0 32.0 4.5 0 72.0 16.0 0.2 0 0 1 0.003\n"
	if err := os.WriteFile(filepath.Join(raw, date, "calib_cam_to_cam.txt"), []byte(calib), 0o644); err != nil {
		t.Fatal(err)
	}
	var split strings.Builder
	for i := 0; i < 5; i++ {
		f, err := src.Render(i%2, i)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%010d.png", i)
		writeTestPNG(t, filepath.Join(raw, date, drive, "image_02", "data", name), func(w *os.File) error { return dataset.EncodeRGBPNG(w, W, H, f.RGB) })
		writeTestPNG(t, filepath.Join(depthRoot, "train", drive, "proj_depth", "groundtruth", "image_02", name),
			func(w *os.File) error { return dataset.EncodeDepthPNG(w, W, H, f.Sparse, dataset.KITTIDepthScale) })
		fmt.Fprintf(&split, "%s/%s %d l\n", date, drive, i)
		writeTestPNG(t, filepath.Join(nyu, "rgb", fmt.Sprintf("room_%d.png", i)), func(w *os.File) error { return dataset.EncodeRGBPNG(w, W, H, f.RGB) })
		writeTestPNG(t, filepath.Join(nyu, "depth", fmt.Sprintf("room_%d.png", i)), func(w *os.File) error { return dataset.EncodeDepthPNG(w, W, H, f.Sparse, 1000) })
	}
	splitFile := filepath.Join(dir, "eigen_train_files.txt")
	if err := os.WriteFile(splitFile, []byte(split.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  AuxTrainConfig
	}{
		{"kitti", AuxTrainConfig{AuxData: AuxData{Data: raw, Layout: dataset.LayoutKITTI, KITTIDepth: depthRoot, Split: splitFile}}},
		{"kitti detected", AuxTrainConfig{AuxData: AuxData{Data: raw, KITTIDepth: depthRoot, Split: splitFile}}},
		{"nyu", AuxTrainConfig{AuxData: AuxData{Data: nyu, Split: dataset.SplitAll}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.DepthModel, c.DepthSpec, c.ValSplit, c.Epochs, c.Batch, c.K = model, spec, "none", 1, 2, 4
			_, st, err := AuxTrain(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if st.Frames != 5 || st.ValFrames != 0 || st.Steps != 2 || !(st.MeanTrainAbsRel > 0) {
				t.Fatalf("frames %d, val %d, steps %d, depth AbsRel %v", st.Frames, st.ValFrames, st.Steps, st.MeanTrainAbsRel)
			}
		})
	}
	// A missing split file says where it looked.
	_, _, err = AuxTrain(context.Background(), AuxTrainConfig{
		AuxDepthModel: AuxDepthModel{DepthModel: model, DepthSpec: spec},
		AuxData:       AuxData{Data: raw, Layout: dataset.LayoutKITTI, Split: "eigen_test"},
	})
	if err == nil || !strings.Contains(err.Error(), "split \"eigen_test\"") || !strings.Contains(err.Error(), filepath.Join(raw, "splits")) {
		t.Fatalf("missing split: %v", err)
	}
}
