package infer

import (
	"path/filepath"
	"strings"
)

// SpecBeside is where a model's IO spec is looked for: spec when given,
// else the model's path with .yaml (models/depth.onnx: models/depth.yaml);
// "" when neither is given.
func SpecBeside(model, spec string) string {
	if spec != "" || model == "" {
		return spec
	}
	return strings.TrimSuffix(model, filepath.Ext(model)) + ".yaml"
}
