package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/record"
)

func TestRecordExportCommand(t *testing.T) {
	dir := t.TempDir()
	rec, err := record.New(record.Config{Mode: record.ModeContinuous, Dir: dir, Queue: 8}, record.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rgb := make([]uint8, 16*8*3)
	for k := 1; k <= 5; k++ {
		rec.Frame(&record.Frame{Camera: "front", Seq: uint64(k), Capture: time.Unix(1_800_000_000, int64(k)*1e8), Width: 16, Height: 8, RGB: rgb})
	}
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.mcap"))
	out := filepath.Join(t.TempDir(), "kitti")
	env, so, se := modelTestEnv()
	if code := run(context.Background(), env, []string{"record", "export", files[0], "--kitti", out, "--intrinsics", "20,20,7.5,3.5"}); code != 0 {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	if !strings.Contains(so.String(), "exported 5 frames (16x8)") || !strings.Contains(so.String(), "needs ground truth") {
		t.Fatalf("output %q", so.String())
	}
	ds, err := dataset.OpenSim(out)
	if err != nil || ds.Meta.Intrinsics.Fx != 20 || ds.Meta.Counts["val"] != 5 {
		t.Fatalf("data set %+v %v", ds, err)
	}
	env, _, se = modelTestEnv()
	if code := run(context.Background(), env, []string{"record", "export", files[0], "--kitti", filepath.Join(t.TempDir(), "k")}); code == 0 ||
		!strings.Contains(se.String(), "camera_calibration") {
		t.Fatalf("export without intrinsics: exit %d, %q", code, se.String())
	}
}
