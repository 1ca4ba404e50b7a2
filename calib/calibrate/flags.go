package calibrate

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/shard"
)

// DataFlags are the data set flags of `didoedge calibrate` and `calibrate
// shard`; --data repeats.
type DataFlags struct {
	Dirs                      []string
	Layout, KITTIDepth, Split string
	MaxFrames                 int
}

// AddFlags declares the flags on fs.
func (d *DataFlags) AddFlags(fs *flag.FlagSet) {
	fs.Func("data", "data set directory: sim render layout, real KITTI (with --split FILE), NYU, a recording's export, or a plain folder of pictures (no ground truth) (repeat for several)", func(s string) error {
		d.Dirs = append(d.Dirs, s)
		return nil
	})
	fs.StringVar(&d.Layout, "layout", "auto", "layout of --data: auto, sim, kitti, nyu, images (a folder of pictures, no ground truth)")
	fs.StringVar(&d.KITTIDepth, "kitti-depth", "", "KITTI: root of the annotated depth (default: --data)")
	fs.StringVar(&d.Split, "split", "val", "split of the data set: a name (train, val, test, all) or a split file")
	fs.IntVar(&d.MaxFrames, "max-frames", 0, "use at most this many frames of each data set (0: all)")
}

// Inputs resolves --data (local directories or s3:// prefixes, read
// through an fs.FS from store) into calibration inputs.
func (d *DataFlags) Inputs(ctx context.Context, store *objstore.Store) ([]Input, error) {
	var in []Input
	for _, dir := range d.Dirs {
		fsys, err := store.DirFS(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("--data %s: %w", dir, err)
		}
		i := Input{Dir: dir, FS: fsys, Layout: d.Layout, KITTIDepth: d.KITTIDepth}
		if d.KITTIDepth != "" {
			if i.KITTIDepthFS, err = store.DirFS(ctx, d.KITTIDepth); err != nil {
				return nil, fmt.Errorf("--kitti-depth %s: %w", d.KITTIDepth, err)
			}
		}
		in = append(in, i)
	}
	return in, nil
}

// ThresholdFlags are the flags of `didoedge calibrate` and `calibrate
// merge` that set the thresholds and the scale correction.
type ThresholdFlags struct {
	TargetFAR, Coverage float64
	Force               bool
}

// AddFlags declares the flags on fs.
func (t *ThresholdFlags) AddFlags(fs *flag.FlagSet) {
	fs.Float64Var(&t.TargetFAR, "target-far", 0.01, "per-pixel false-alarm rate on in-distribution frames")
	fs.BoolVar(&t.Force, "force", false, "calibrate even when the frames look out of distribution for the AuxUE (outside its training-domain record, or their median K/S above its validation p90)")
	fs.Float64Var(&t.Coverage, "coverage", 0.9, "nominal coverage of the Laplace interval")
}

// ShardFlags are `didoedge calibrate shard`'s own flags.
type ShardFlags struct {
	Index, Count int
	Out          string
}

// AddFlags declares the flags on fs.
func (f *ShardFlags) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&f.Index, "index", -1, "shard index (default: $"+shard.EnvIndex+", else 0)")
	fs.IntVar(&f.Count, "count", 0, "number of shards (default: $"+shard.EnvCount+", else 1)")
	fs.StringVar(&f.Out, "out", "", "summary file to write (JSON); "+IndexPlaceholder+" is replaced by the index")
}

// Write writes the shard's summary to --out (IndexPlaceholder replaced by
// the index; a file or an s3:// object) through store and prints one line
// to w.
func (f *ShardFlags) Write(ctx context.Context, store *objstore.Store, sum *Summary, w io.Writer) error {
	path := SummaryPath(f.Out, f.Index)
	var buf bytes.Buffer
	if err := sum.Write(&buf); err != nil {
		return fmt.Errorf("calibration summary %s: %w", path, err)
	}
	if err := store.WriteFile(ctx, path, buf.Bytes()); err != nil {
		return fmt.Errorf("calibration summary: %w", err)
	}
	_, err := fmt.Fprintf(w, "shard %d of %d: %d of %d frames, %d pixels (%d with ground truth); wrote %s\n",
		f.Index, f.Count, sum.Frames, sum.Listing.Frames, sum.Pixels, sum.GTPixels, path)
	return err
}

// ReadSummaries reads the shard summaries at locs (files, or directories
// and s3:// prefixes: their .json files) through store.
func ReadSummaries(ctx context.Context, store *objstore.Store, locs []string) ([]Named, error) {
	files, err := store.Expand(ctx, locs, ".json")
	if err != nil {
		return nil, fmt.Errorf("calibration summary: %w", err)
	}
	var sums []Named
	for _, f := range files {
		data, err := store.ReadFile(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("calibration summary: %w", err)
		}
		s, err := ReadSummary(bytes.NewReader(data), f)
		if err != nil {
			return nil, err
		}
		sums = append(sums, Named{Name: f, Summary: s})
	}
	return sums, nil
}

// WriteCalibration writes res's calibration YAML to out (a file or an
// s3:// object) through store and prints the summary to w.
func WriteCalibration(ctx context.Context, store *objstore.Store, out string, res *Result, w io.Writer) error {
	var buf bytes.Buffer
	if err := alerts.WriteCalibration(&buf, res.Calibration); err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	if err := store.WriteFile(ctx, out, buf.Bytes()); err != nil {
		return fmt.Errorf("write calibration: %w", err)
	}
	res.WriteSummary(w)
	_, err := fmt.Fprintf(w, "wrote %s\n", out)
	return err
}
