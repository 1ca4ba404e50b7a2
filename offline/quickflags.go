package offline

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/shard"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// QuickFlags are the flags of `didoedge eval-quick` and `eval-quick shard`.
type QuickFlags struct {
	Data, Layout, KITTIDepth, Indoor, Models                      string
	Depth, DepthSpec, AuxUE, AuxUESpec, Providers, Split, Library string
	MaxFrames, MaxIndoor                                          int
	JSON                                                          bool
	// Index, Count and Out: eval-quick shard's slice and statistics file.
	Index, Count int
	Out          string
	// Report also receives what is printed.
	Report string
}

// AddFlags declares the flags on fs.
func (f *QuickFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Data, "data", "", "data set: sim render layout, real KITTI (with --split FILE) or NYU (required)")
	fs.StringVar(&f.Layout, "layout", "auto", "layout of --data: auto, sim, kitti, nyu")
	fs.StringVar(&f.KITTIDepth, "kitti-depth", "", "KITTI: root of the annotated depth (default: --data)")
	fs.StringVar(&f.Indoor, "indoor", "", "second data set whose ground-truth pixels are the positives of the data-set-change AUC")
	fs.StringVar(&f.Models, "models", "models", "directory with depth.onnx, depth.yaml, auxue.onnx and auxue.yaml")
	fs.StringVar(&f.Depth, "depth", "", "depth model (overrides --models; any ONNX depth model with an IO spec)")
	fs.StringVar(&f.DepthSpec, "depth-spec", "", "IO spec of --depth (default: its path with .yaml)")
	fs.StringVar(&f.AuxUE, "auxue", "", "AuxUE model (overrides --models)")
	fs.StringVar(&f.AuxUESpec, "auxue-spec", "", "IO spec of --auxue (default: its path with .yaml)")
	fs.StringVar(&f.Providers, "providers", "cpu", "execution providers, in order: tensorrt, cuda, cpu")
	fs.StringVar(&f.Split, "split", "all", "split of --data: train, val, test, all, or a split file")
	fs.IntVar(&f.MaxFrames, "max-frames", 0, "use at most this many outdoor frames (0 = all)")
	fs.IntVar(&f.MaxIndoor, "max-indoor", 0, "use at most this many indoor frames (0 = all)")
	fs.StringVar(&f.Library, "library", "", "ONNX Runtime library (default: $ONNXRUNTIME_LIB, then third_party/)")
	fs.BoolVar(&f.JSON, "json", false, "print JSON")
	fs.IntVar(&f.Index, "index", -1, "shard: index (default: $"+shard.EnvIndex+", else 0)")
	fs.IntVar(&f.Count, "count", 0, "shard: number of shards (default: $"+shard.EnvCount+", else 1)")
	fs.StringVar(&f.Out, "out", "", "shard: statistics file to write (JSON, a path or s3:// URL); "+shard.IndexPlaceholder+" is replaced by the index")
	fs.StringVar(&f.Report, "report", "", "also write what is printed to this file or s3:// object")
}

// Config is the evaluation the flags describe; the data sets (directories
// or s3:// prefixes) are opened through store.
func (f *QuickFlags) Config(ctx context.Context, store *objstore.Store, log *slog.Logger) (QuickConfig, error) {
	if f.Data == "" {
		return QuickConfig{}, fmt.Errorf("--data is required")
	}
	inf, err := onnxrt.ParseProviders(f.Providers, f.Library)
	if err != nil {
		return QuickConfig{}, fmt.Errorf("flag -providers: %w", err)
	}
	cfg := QuickConfig{Data: f.Data, Layout: f.Layout, KITTIDepth: f.KITTIDepth, Indoor: f.Indoor,
		Models: f.Models, DepthModel: f.Depth, DepthSpec: infer.SpecBeside(f.Depth, f.DepthSpec), AuxUEModel: f.AuxUE,
		AuxUESpec: infer.SpecBeside(f.AuxUE, f.AuxUESpec), Inference: inf, Split: f.Split, MaxFrames: f.MaxFrames,
		MaxIndoor: f.MaxIndoor, Log: log}
	for _, d := range []struct {
		flag, loc string
		fsys      *iofs.FS
	}{{"--data", f.Data, &cfg.DataFS}, {"--indoor", f.Indoor, &cfg.IndoorFS}, {"--kitti-depth", f.KITTIDepth, &cfg.KITTIDepthFS}} {
		if d.loc == "" {
			continue
		}
		if *d.fsys, err = store.DirFS(ctx, d.loc); err != nil {
			return QuickConfig{}, fmt.Errorf("%s %s: %w", d.flag, d.loc, err)
		}
	}
	return cfg, nil
}

// Shard runs shard --index of --count (from the environment when unset)
// and writes its statistics to --out through store; w gets one line.
func (f *QuickFlags) Shard(ctx context.Context, cfg QuickConfig, store *objstore.Store, w io.Writer) error {
	if f.Out == "" {
		return fmt.Errorf("eval-quick shard: --out FILE is required")
	}
	if err := shard.FromEnv(&f.Index, &f.Count); err != nil {
		return err
	}
	st, err := QuickShard(ctx, cfg, f.Index, f.Count)
	if err != nil {
		return err
	}
	path := shard.Path(f.Out, f.Index)
	var buf bytes.Buffer
	if err := st.Write(&buf); err != nil {
		return fmt.Errorf("eval-quick shard %s: %w", path, err)
	}
	if err := store.WriteFile(ctx, path, buf.Bytes()); err != nil {
		return fmt.Errorf("eval-quick shard: %w", err)
	}
	_, err = fmt.Fprintf(w, "eval-quick shard %d of %d: %d outdoor and %d indoor frames of %d; wrote %s\n",
		f.Index, f.Count, st.Frames, st.Indoor, st.Listing.Frames, path)
	return err
}

// PrintReport prints what write writes to w and, when report names a file
// or an s3:// object (--report), writes the same there through store.
func PrintReport(ctx context.Context, store *objstore.Store, report string, w io.Writer, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	if report != "" {
		if err := store.WriteFile(ctx, report, buf.Bytes()); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}
