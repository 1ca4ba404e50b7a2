package offline

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/didoedge/didoedge/camera/intrinsics"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/offline/modeltool"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// ProbeFlags are the --probe flags of `didoedge model inspect`.
type ProbeFlags struct {
	Probe                       bool
	Spec, Image, Size, Provider string
	Seed                        int64
	Intrinsics                  intrinsics.Flags
}

// AddFlags declares the flags on fs.
func (f *ProbeFlags) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.Probe, "probe", false, "run the depth model on a frame and describe its output (range, sign, resolution, bottom-to-top trend), propose the spec lines and check --spec against them")
	fs.StringVar(&f.Spec, "spec", "", "with --probe: the model's IO spec to check (default: guess the input, read the finest output raw)")
	fs.StringVar(&f.Image, "image", "", "with --probe: run on this PNG/JPEG (default: a simulated road frame whose depth is known)")
	fs.Int64Var(&f.Seed, "seed", 1, "with --probe: seed of the simulated frame")
	fs.StringVar(&f.Size, "size", "", "with --probe and no --spec: HxW of an input with dynamic sides (default 192x640)")
	fs.StringVar(&f.Provider, "providers", "cpu", "with --probe: execution providers in order")
	f.Intrinsics.AddFlags(fs, "with --probe: the camera's fx,fy,cx,cy[,width,height] (a canonical_focal model's metres)",
		"with --probe: the camera's intrinsics from a KITTI calibration or a ROS CameraInfo YAML")
}

// Config is the probe of model the flags describe.
func (f *ProbeFlags) Config(model string, log *slog.Logger) (ProbeConfig, error) {
	cfg := ProbeConfig{Model: model, Spec: f.Spec, Image: f.Image, SimSeed: f.Seed, Log: log}
	var err error
	if f.Size != "" {
		if cfg.Height, cfg.Width, err = sim.ParseSize(f.Size); err != nil {
			return cfg, fmt.Errorf("flag -size: %w", err)
		}
	}
	if cfg.Intrinsics, err = f.Intrinsics.Intrinsics(); err != nil {
		return cfg, err
	}
	if cfg.Inference, err = onnxrt.ParseProviders(f.Provider, ""); err != nil {
		return cfg, fmt.Errorf("flag -providers: %w", err)
	}
	return cfg, nil
}

// ModelRunFlags are the flags of `didoedge model run`: the depth model then
// the AuxUE on one's own images (--images: RunImages) or on synthetic
// frames (modeltool.Run, the cross-build smoke test).
type ModelRunFlags struct {
	Images, Providers, Depth, DepthSpec, AuxUE, AuxUESpec, Out, Config, Library string
	Frames, Height, Width                                                       int
	Seed                                                                        uint64
	Intrinsics                                                                  intrinsics.Flags
}

// AddFlags declares the flags on fs.
func (f *ModelRunFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Images, "images", "", "run on these images: a directory (its .png, .jpg, .jpeg) or a glob; maps at each image's size")
	fs.StringVar(&f.AuxUESpec, "auxue-spec", "", "with --images: IO spec of the AuxUE (default: its path with .yaml)")
	fs.StringVar(&f.Providers, "providers", "cpu", "with --images: execution providers in order (tensorrt, cuda, cpu)")
	fs.StringVar(&f.Depth, "depth", "", "depth model (input image NCHW, output depth)")
	fs.StringVar(&f.AuxUE, "auxue", "", "AuxUE model (input features = image + depth, outputs scale, epistemic)")
	fs.StringVar(&f.Out, "out", "", "output directory for the maps and "+modeltool.SummaryFile)
	fs.IntVar(&f.Frames, "frames", 3, "number of synthetic frames")
	fs.Uint64Var(&f.Seed, "seed", 1, "synthetic frame seed")
	fs.IntVar(&f.Height, "height", 64, "frame height (the models' input height)")
	fs.IntVar(&f.Width, "width", 192, "frame width (the models' input width)")
	fs.StringVar(&f.DepthSpec, "depth-spec", "", "IO spec YAML of the depth model (e.g. models/depth.yaml); sets the frame size")
	fs.StringVar(&f.Config, "config", "", "YAML config whose inference section selects library and providers (default: CPU)")
	fs.StringVar(&f.Library, "library", "", "ONNX Runtime library (overrides the config's library key)")
	f.Intrinsics.AddFlags(fs, "with --images: the camera's fx,fy,cx,cy[,width,height] in pixels (of images width x height; scaled to each image)",
		"with --images: the camera's intrinsics from a KITTI calibration (P_rect_02, P2) or a ROS CameraInfo YAML (K)")
}

// Run runs the models as the flags say, with the camera's intrinsics in
// (nil: unknown), and prints the summary to w.
func (f *ModelRunFlags) Run(ctx context.Context, in *intrinsics.Intrinsics, w io.Writer, log *slog.Logger) error {
	var cfg onnxrt.Config
	var err error
	if f.Config != "" {
		if cfg, err = modeltool.LoadInferenceConfig(f.Config); err != nil {
			return err
		}
	}
	if f.Library != "" {
		cfg.Library = f.Library
	}
	if f.Images != "" {
		if f.Config == "" {
			if cfg, err = onnxrt.ParseProviders(f.Providers, cfg.Library); err != nil {
				return fmt.Errorf("flag -providers: %w", err)
			}
		}
		sum, err := RunImages(ctx, ImageRunConfig{Images: f.Images, Out: f.Out, Depth: f.Depth,
			DepthSpec: infer.SpecBeside(f.Depth, f.DepthSpec), AuxUE: f.AuxUE, AuxUESpec: infer.SpecBeside(f.AuxUE, f.AuxUESpec),
			Inference: cfg, Intrinsics: in, Log: log})
		if err != nil {
			return err
		}
		sum.Write(w, f.Out)
		return nil
	}
	var spec infer.IOSpec
	height, width := f.Height, f.Width
	if f.DepthSpec != "" {
		data, err := os.ReadFile(f.DepthSpec)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if spec, err = infer.ParseIOSpec(data, f.DepthSpec); err != nil {
			return err
		}
		height, width = spec.Input.Height, spec.Input.Width
	}
	// The AuxUE's spec: --auxue-spec, or the file beside the model when
	// it exists (the reference models' auxue.yaml).
	var auxIO infer.IOSpec
	if p := infer.SpecBeside(f.AuxUE, f.AuxUESpec); f.AuxUESpec != "" || fileExists(p) {
		if auxIO, err = ReadSpec(p, infer.KindAuxUE); err != nil {
			return err
		}
	}
	sum, err := modeltool.Run(ctx, modeltool.RunConfig{
		DepthModel: f.Depth, AuxUEModel: f.AuxUE, Height: height, Width: width, DepthSpec: spec, AuxUESpec: auxIO,
		Frames: f.Frames, Seed: f.Seed, OutDir: f.Out, Inference: cfg, Log: log,
	})
	if err != nil {
		return err
	}
	sum.Write(w)
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
