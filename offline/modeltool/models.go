package modeltool

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/didoedge/didoedge/auxue/onnxexport"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/pkg/onnx"
)

// File names of the exported test networks. The "test-" prefix and the
// note file make clear they are not reference models.
const (
	TestDepthFile = "test-depth-tinyunet.onnx"
	TestAuxUEFile = "test-auxue.onnx"
	TestNoteFile  = "TEST-NETWORKS.txt"
)

// Names of the graph inputs and outputs the smoke run feeds and reads. The
// depth model follows pkg/onnx's TinyUNet export; the AuxUE follows
// pkg/onnx's ExportAuxUE, with its input being the normalized image plus
// the predicted depth as a fourth channel.
const (
	DepthInput  = "image"
	DepthOutput = "depth"
	AuxUEInput  = "features"
)

// TestModelConfig fixes the test networks' size and weights.
type TestModelConfig struct {
	Height, Width int    // input size; both divisible by 4 (TinyUNet's two stride-2 stages)
	Seed          uint64 // seeds every weight
	DepthBase     int    // TinyUNet base channels (0 means 8)
	K             int    // DIDO bins (0 means 32, the paper's value for depth)
}

func (c TestModelConfig) withDefaults() TestModelConfig {
	if c.DepthBase == 0 {
		c.DepthBase = 8
	}
	if c.K == 0 {
		c.K = 32
	}
	return c
}

// TestModels are the paths and sha256 of the exported test networks.
type TestModels struct {
	Depth, AuxUE             string
	DepthSHA256, AuxUESHA256 string
}

// ExportTestModels writes the depth test network and the AuxUE test network
// into dir. The bytes are a pure function of cfg: exporting twice gives
// identical files.
func ExportTestModels(dir string, cfg TestModelConfig) (TestModels, error) {
	cfg = cfg.withDefaults()
	if cfg.Height <= 0 || cfg.Width <= 0 || cfg.Height%4 != 0 || cfg.Width%4 != 0 {
		return TestModels{}, fmt.Errorf("export test models: size %dx%d (HxW) must be positive and divisible by 4", cfg.Height, cfg.Width)
	}
	if cfg.DepthBase < 1 || cfg.K < 2 {
		return TestModels{}, fmt.Errorf("export test models: depth base %d must be >= 1 and K %d >= 2", cfg.DepthBase, cfg.K)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return TestModels{}, fmt.Errorf("export test models: %w", err)
	}
	h, w := int64(cfg.Height), int64(cfg.Width)
	unet, aux, err := testNetworks(cfg)
	if err != nil {
		return TestModels{}, fmt.Errorf("export test models: %w", err)
	}
	depth, err := unet.Export([]int64{1, 3, h, w})
	if err != nil {
		return TestModels{}, fmt.Errorf("export test models: %w", err)
	}
	auxModel, err := onnxexport.ExportAuxUE(aux, []int64{1, 4, h, w})
	if err != nil {
		return TestModels{}, fmt.Errorf("export test models: %w", err)
	}
	out := TestModels{Depth: filepath.Join(dir, TestDepthFile), AuxUE: filepath.Join(dir, TestAuxUEFile)}
	if out.DepthSHA256, err = writeModel(out.Depth, depth); err != nil {
		return TestModels{}, err
	}
	if out.AuxUESHA256, err = writeModel(out.AuxUE, auxModel); err != nil {
		return TestModels{}, err
	}
	note := fmt.Sprintf(`TEST NETWORKS with seeded random weights: NOT reference models, their outputs mean nothing.
They exist so that the arm64 smoke test (offline/modeltool-qemu.sh) has deterministic models
before trained ones exist. Made by: didoedge model export-test --height %d --width %d --seed %d
%s  %s  TinyUNet base %d, input image 1x3x%dx%d, outputs depth, features
%s  %s  dense generalized AuxUE (Laplace + DIDO K=%d), input features 1x4x%dx%d (image + depth)
`, cfg.Height, cfg.Width, cfg.Seed,
		out.DepthSHA256, TestDepthFile, cfg.DepthBase, cfg.Height, cfg.Width,
		out.AuxUESHA256, TestAuxUEFile, cfg.K, cfg.Height, cfg.Width)
	if err := os.WriteFile(filepath.Join(dir, TestNoteFile), []byte(note), 0o644); err != nil {
		return TestModels{}, fmt.Errorf("export test models: %w", err)
	}
	return out, nil
}

// testNetworks builds the two networks in Go; their weights depend only on
// cfg.Seed, cfg.DepthBase and cfg.K.
func testNetworks(cfg TestModelConfig) (*onnx.TinyUNet, *auxue.Model, error) {
	unet, err := onnx.NewTinyUNet(cfg.DepthBase, rand.New(rand.NewPCG(cfg.Seed, 0x64657074)))
	if err != nil {
		return nil, nil, err
	}
	aux, err := auxue.NewModel(auxue.Config{
		Form: auxue.FormDense, In: 4, EncoderWidth: 8, SharedEncoder: true, Hidden: 8,
		K: cfg.K, Lambda: 0.01, Seed: cfg.Seed,
	})
	if err != nil {
		return nil, nil, err
	}
	return unet, aux, nil
}

func writeModel(path string, m *onnx.Model) (string, error) {
	data := m.Marshal()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("export test models: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// AddFlags declares `didoedge model export-test`'s size and seed flags on
// fs.
func (c *TestModelConfig) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Height, "height", 64, "input height (divisible by 4)")
	fs.IntVar(&c.Width, "width", 192, "input width (divisible by 4)")
	fs.Uint64Var(&c.Seed, "seed", 1, "weight seed")
}
