package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/didoedge/didoedge/camera/intrinsics"
	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/runtime/apps/export"
	"github.com/didoedge/didoedge/runtime/record"
)

// runRecord dispatches the recording subcommands.
func runRecord(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] != "export" {
		return errors.New("usage: didoedge record export FILE|s3://BUCKET/KEY --kitti DIR [--camera ID] [--every N] [--drive NAME] [--maps] [--intrinsics fx,fy,cx,cy[,w,h] | --intrinsics-file FILE]")
	}
	return runRecordExport(ctx, env, args[1:])
}

// runRecordExport writes a recording's frames in the KITTI layout that
// `didoedge calibrate --data DIR` reads.
func runRecordExport(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "record export")
	kitti := fs.String("kitti", "", "data set directory to write (dataset KITTI layout)")
	cam := fs.String("camera", "", "camera id (default: the only camera of the file)")
	every := fs.Int("every", 1, "keep one frame in N")
	drive := fs.String("drive", "", "drive name (default: the file name)")
	split := fs.String("split", "val", "split of the frames (calibrate reads val)")
	maps := fs.Bool("maps", false, "also write the recorded maps at the frame's size (NumPy float32 .npy) under DIR/<drive>/maps/")
	var intr intrinsics.Flags
	intr.AddFlags(fs, "fx,fy,cx,cy[,width,height] when the recording has no camera_calibration channel",
		"the same from a KITTI calibration (P_rect_02, P2) or a ROS CameraInfo YAML (K)")
	// FILE may come before or after the flags.
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *kitti == "" {
		return errors.New("usage: didoedge record export FILE --kitti DIR")
	}
	file := pos[0]
	if objstore.IsURL(*kitti) {
		return fmt.Errorf("record export --kitti %s: the data set is written to a local directory (a file per frame and map): export to a directory, then copy it to object storage (aws s3 sync DIR %s); calibrate --data reads it there", *kitti, *kitti)
	}
	// FILE may be an s3:// object: each pass of the export streams it.
	o := export.Options{Dir: *kitti, Camera: *cam, Every: *every, Drive: *drive, Split: *split, Maps: *maps,
		Open: func() (io.ReadCloser, int64, error) { return env.store().Open(ctx, file) }}
	in, err := intr.Intrinsics()
	if err != nil {
		return err
	}
	if in != nil {
		// Of frames width x height when given: export scales them to the
		// recording's frames.
		o.Intrinsics = &record.Intrinsics{Fx: in.Fx, Fy: in.Fy, Cx: in.Cx, Cy: in.Cy, Width: in.Width, Height: in.Height}
	}
	res, err := export.KITTI(ctx, file, o)
	if err != nil {
		return err
	}
	res.Write(env.stdout, file, *kitti)
	return nil
}
