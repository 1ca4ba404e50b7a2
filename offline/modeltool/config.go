package modeltool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// inferenceFile picks the inference section out of a full didoedge config.
// The other sections (models, camera, zones, mqtt, ...) belong to their own
// parsers and are kept raw here; unknown keys inside inference are rejected
// with the line of the original file.
type inferenceFile struct {
	Inference *onnxrt.Config       `yaml:"inference"`
	Rest      map[string]yaml.Node `yaml:",inline"`
}

// ParseInferenceConfig decodes the inference section of a didoedge YAML
// config (configs/jetson-orin.yaml) and validates it; source names the file.
func ParseInferenceConfig(data []byte, source string) (onnxrt.Config, error) {
	var f inferenceFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return onnxrt.Config{}, fmt.Errorf("config %q: empty file", source)
		}
		return onnxrt.Config{}, fmt.Errorf("config %q: %w", source, err)
	}
	if f.Inference == nil {
		return onnxrt.Config{}, fmt.Errorf("config %q: no inference section", source)
	}
	if err := f.Inference.Validate(); err != nil {
		return onnxrt.Config{}, fmt.Errorf("config %q: inference.%w", source, err)
	}
	return *f.Inference, nil
}

// LoadInferenceConfig reads a config file and returns its inference section.
func LoadInferenceConfig(path string) (onnxrt.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return onnxrt.Config{}, fmt.Errorf("load config: %w", err)
	}
	return ParseInferenceConfig(data, path)
}
