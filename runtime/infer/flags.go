package infer

import (
	"path/filepath"
	"strings"
)

// ParseProviders reads the commands' --providers list ("cuda,cpu"; a name
// followed by ":required" is marked required: "cuda:required") and their
// --library path into a validated Config.
func ParseProviders(list, library string) (Config, error) {
	c := Config{Library: library}
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			name, req := strings.CutSuffix(p, ":required")
			c.Providers = append(c.Providers, ProviderConfig{Name: name, Required: req})
		}
	}
	return c, c.Validate()
}

// SpecBeside is where a model's IO spec is looked for: spec when given,
// else the model's path with .yaml (models/depth.onnx: models/depth.yaml);
// "" when neither is given.
func SpecBeside(model, spec string) string {
	if spec != "" || model == "" {
		return spec
	}
	return strings.TrimSuffix(model, filepath.Ext(model)) + ".yaml"
}
