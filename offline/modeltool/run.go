package modeltool

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"

	"github.com/didoedge/didoedge/auxue/onnxexport"

	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// Map names, in the order each frame's files are written.
const (
	MapDepth     = "depth"     // metres, from the depth model (0 = no depth)
	MapScale     = "scale"     // AuxUE Laplace scale b (aleatoric)
	MapEpistemic = "epistemic" // AuxUE DIDO K/S in (0, 1]
)

// SummaryFile is the name of the run description inside a run directory.
const SummaryFile = "summary.json"

// RunConfig describes one smoke run.
type RunConfig struct {
	DepthModel, AuxUEModel string
	Height, Width          int    // frame size; must match the models' inputs
	Frames                 int    // number of synthetic frames
	Seed                   uint64 // seeds the synthetic frames
	OutDir                 string
	Inference              onnxrt.Config // library and execution providers
	// DepthSpec is the depth model's IO spec (input name, normalization,
	// size, depth meaning), as models/depth.yaml gives it for a reference
	// model. Zero means the test network's: input "image" with no
	// normalization (p/255), metric output "depth", Height x Width. When set,
	// its input size must equal Height x Width.
	DepthSpec infer.IOSpec
	// AuxUESpec is the AuxUE's IO spec (auxue.yaml of the reference
	// models: it reads the depth model's image input and depth itself).
	// Zero means the test network's: one (1,4,H,W) "features" input, the
	// normalized image and the depth, or the depth model's first feature
	// output when its spec names one.
	AuxUESpec infer.IOSpec
	Log       *slog.Logger
}

// Run runs the depth model on Frames synthetic frames, then the AuxUE on
// the depth model's feature output when its spec names one (the reference
// models), else on the normalized image with the predicted depth as a fourth channel,
// and writes the depth, scale and epistemic maps and summary.json to OutDir.
// A non-finite value in any output fails the run.
func Run(ctx context.Context, cfg RunConfig) (*Summary, error) {
	if cfg.Height <= 0 || cfg.Width <= 0 || cfg.Frames <= 0 || cfg.Frames > 1000 {
		return nil, fmt.Errorf("smoke run: size %dx%d and frames %d must be positive (frames at most 1000)", cfg.Height, cfg.Width, cfg.Frames)
	}
	if cfg.DepthModel == "" || cfg.AuxUEModel == "" || cfg.OutDir == "" {
		return nil, errors.New("smoke run: depth model, AuxUE model and output directory are required")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	depthSHA, err := fileSHA256(cfg.DepthModel)
	if err != nil {
		return nil, err
	}
	auxSHA, err := fileSHA256(cfg.AuxUEModel)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("smoke run: %w", err)
	}

	depthSpec := cfg.DepthSpec
	if depthSpec.Input.Name == "" {
		depthSpec = infer.IOSpec{
			Input: infer.InputSpec{Name: DepthInput, Layout: "NCHW", Channels: 3, Height: cfg.Height, Width: cfg.Width},
			Depth: infer.OutputSpec{Name: DepthOutput, Meaning: infer.MeaningMetricDepth},
		}
	}
	if depthSpec.Input.Height != cfg.Height || depthSpec.Input.Width != cfg.Width {
		return nil, fmt.Errorf("smoke run: frame size %dx%d differs from the depth io spec's %dx%d", cfg.Height, cfg.Width, depthSpec.Input.Height, depthSpec.Input.Width)
	}
	depthSess, err := infer.NewSession(ctx, cfg.DepthModel, depthSpec, cfg.Inference, log)
	if err != nil {
		return nil, err
	}
	defer depthSess.Close()
	// An AuxUE that owns its inputs (the reference models' auxue.yaml)
	// reads the depth model's image input and depth. Otherwise a depth spec
	// with a feature output feeds that tensor to the AuxUE as is, else the
	// AuxUE takes the normalized image with the predicted depth as a
	// fourth channel.
	auxSpec := cfg.AuxUESpec
	fromFeatures := false
	if auxSpec.Input.Name == "" {
		auxIn := infer.InputSpec{Name: AuxUEInput, Layout: "NCHW", Channels: 4, Height: cfg.Height, Width: cfg.Width}
		if fromFeatures = len(depthSpec.Features) > 0; fromFeatures {
			shape := depthSess.OutputShape(1)
			if len(shape) != 4 || shape[0] != 1 {
				return nil, fmt.Errorf("smoke run: depth feature output %q has shape %v, want (1,C,H,W)", depthSpec.Features[0].Name, shape)
			}
			auxIn.Channels, auxIn.Height, auxIn.Width = int(shape[1]), int(shape[2]), int(shape[3])
		}
		auxSpec = infer.IOSpec{Kind: infer.KindAuxUE, Input: auxIn,
			Scale: infer.TensorSpec{Name: onnxexport.OutputScale}, Epistemic: infer.TensorSpec{Name: onnxexport.OutputEpistemic}}
	}
	if auxSpec.OwnsInputs() {
		if err := infer.CheckPair(depthSpec, auxSpec, nil); err != nil {
			return nil, fmt.Errorf("smoke run: %w", err)
		}
	}
	auxSess, err := infer.NewSession(ctx, cfg.AuxUEModel, auxSpec, cfg.Inference, log)
	if err != nil {
		return nil, err
	}
	defer auxSess.Close()

	plane := cfg.Height * cfg.Width
	for i, sess := range []*infer.Session{depthSess, auxSess} {
		for o := range sess.OutputNames() {
			if (i == 0 && o > 0) || o > 1 {
				break // the depth model's extra outputs and alpha are not used
			}
			if n := len(sess.Output(o)); n != plane {
				return nil, fmt.Errorf("smoke run: output %q has shape %v (%d values), want one %dx%d map",
					sess.OutputNames()[o], sess.OutputShape(o), n, cfg.Height, cfg.Width)
			}
		}
	}

	lib := depthSess.Library()
	sum := &Summary{
		Tool: "didoedge model run", GOARCH: runtime.GOARCH,
		Height: cfg.Height, Width: cfg.Width, Frames: cfg.Frames, Seed: cfg.Seed,
		Library: LibraryInfo{Path: lib.Path, Source: lib.Source, Version: lib.Version},
		Models: []ModelInfo{
			{Role: "depth", Path: cfg.DepthModel, SHA256: depthSHA, Provider: depthSess.Provider()},
			{Role: "auxue", Path: cfg.AuxUEModel, SHA256: auxSHA, Provider: auxSess.Provider()},
		},
	}
	rgb := make([]byte, 3*plane)
	depth := make([]float32, plane)
	buf := make([]byte, 4*plane)
	for f := range cfg.Frames {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		SyntheticFrame(rgb, cfg.Width, cfg.Height, cfg.Seed, f)
		if err := depthSess.SetImageRGB8(rgb, cfg.Width, cfg.Height, 3*cfg.Width); err != nil {
			return nil, err
		}
		fr, err := depthSess.Run(ctx)
		if err != nil {
			return nil, err
		}
		if !fr.Valid {
			return nil, fmt.Errorf("smoke run: frame %d: depth model %q gave non-finite outputs %v", f, cfg.DepthModel, fr.NonFinite)
		}
		invalid, err := depthSess.DepthInto(depth)
		if err != nil {
			return nil, err
		}
		in := auxSess.Input()
		switch {
		case auxSpec.OwnsInputs():
			copy(in, depthSess.Input())
			copy(auxSess.InputAt(1), depth)
		case fromFeatures:
			copy(in, depthSess.Output(1))
		default:
			copy(in[:3*plane], depthSess.Input())
			copy(in[3*plane:], depth)
		}
		fr, err = auxSess.Run(ctx)
		if err != nil {
			return nil, err
		}
		if !fr.Valid {
			return nil, fmt.Errorf("smoke run: frame %d: AuxUE %q gave non-finite outputs %v", f, cfg.AuxUEModel, fr.NonFinite)
		}
		maps := []struct {
			name    string
			data    []float32
			invalid int
		}{{MapDepth, depth, invalid}, {MapScale, auxSess.Output(0), 0}, {MapEpistemic, auxSess.Output(1), 0}}
		for _, m := range maps {
			name := fmt.Sprintf("frame%03d_%s.f32", f, m.name)
			if err := writeFloat32(filepath.Join(cfg.OutDir, name), m.data, buf); err != nil {
				return nil, err
			}
			st := stats(m.data)
			sum.Maps = append(sum.Maps, MapFile{Frame: f, Map: m.name, File: name,
				Min: st.min, Max: st.max, Mean: st.mean, Invalid: m.invalid})
		}
	}
	data, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("smoke run: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.OutDir, SummaryFile), append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("smoke run: %w", err)
	}
	return sum, nil
}

// SyntheticFrame fills dst (interleaved RGB8, stride 3*width) with frame f
// of a seeded pattern: three gradients that drift with f plus uniform noise
// in [-24, 24]. Integer arithmetic only, so every architecture produces the
// same bytes (float code may be fused into FMA on arm64).
func SyntheticFrame(dst []byte, width, height int, seed uint64, f int) {
	rng := rand.New(rand.NewPCG(seed, uint64(f)+1))
	wd, hd := max(width-1, 1), max(height-1, 1)
	for y := range height {
		for x := range width {
			base := [3]int{
				(x*255/wd + 29*f) % 256,
				y * 255 / hd,
				((x+y)*255/(wd+hd) + 255 - 13*f%256) % 256,
			}
			p := dst[3*(y*width+x):]
			for c, v := range base {
				v += rng.IntN(49) - 24
				p[c] = byte(min(max(v, 0), 255))
			}
		}
	}
}

func writeFloat32(path string, data []float32, buf []byte) error {
	buf = buf[:0]
	for _, v := range data {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		return fmt.Errorf("smoke run: write map: %w", err)
	}
	return nil
}

type mapStats struct{ min, max, mean float64 }

func stats(xs []float32) mapStats {
	s := mapStats{min: math.Inf(1), max: math.Inf(-1)}
	var total float64
	for _, v := range xs {
		f := float64(v)
		s.min, s.max = math.Min(s.min, f), math.Max(s.max, f)
		total += f
	}
	if len(xs) > 0 {
		s.mean = total / float64(len(xs))
	}
	return s
}

func fileSHA256(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("smoke run: read model: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
