package onnxrt

import (
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
