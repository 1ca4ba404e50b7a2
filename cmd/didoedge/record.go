package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/didoedge/didoedge/runtime/apps/export"
	"github.com/didoedge/didoedge/runtime/record"
)

// runRecord dispatches the recording subcommands.
func runRecord(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] != "export" {
		return errors.New("usage: didoedge record export FILE --kitti DIR [--camera ID] [--every N] [--drive NAME] [--intrinsics fx,fy,cx,cy]")
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
	intr := fs.String("intrinsics", "", "fx,fy,cx,cy when the recording has no camera_calibration channel")
	// FILE may come before or after the flags.
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *kitti == "" {
		return errors.New("usage: didoedge record export FILE --kitti DIR")
	}
	file := pos[0]
	o := export.Options{Dir: *kitti, Camera: *cam, Every: *every, Drive: *drive, Split: *split}
	if *intr != "" {
		parts := strings.Split(*intr, ",")
		var v [4]float64
		if len(parts) != 4 {
			return fmt.Errorf("--intrinsics %q: want fx,fy,cx,cy", *intr)
		}
		for i, p := range parts {
			x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return fmt.Errorf("--intrinsics %q: %w", *intr, err)
			}
			v[i] = x
		}
		o.Intrinsics = &record.Intrinsics{Fx: v[0], Fy: v[1], Cx: v[2], Cy: v[3]}
	}
	res, err := export.KITTI(ctx, file, o)
	if err != nil {
		return err
	}
	res.Write(env.stdout, file, *kitti)
	return nil
}
