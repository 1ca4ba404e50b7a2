package depthnet

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/didoedge/didoedge/auxue/onnx"
)

// IOSpecYAML is the runtime/infer IO spec of the exported model.
func (n *Net) IOSpecYAML(width int) string {
	return fmt.Sprintf(`# runtime/infer IO spec of the didoedge reference depth network (auxue/depthnet)
input:
  name: %s
  layout: NCHW
  channels: 3
  height: %d
  width: %d
  mean: [%g, %g, %g]
  std: [%g, %g, %g]
depth:
  name: %s
  meaning: metric_depth
  scale: 1
features:
  - name: %s   # the AuxUE's input (1,C,H/2,W/2); feed it to auxue.onnx as is
`, InputName, n.Config.Height, width, Mean[0], Mean[1], Mean[2], Std[0], Std[1], Std[2], OutputName, AuxFeaturesName)
}

// WriteArtifacts exports the network to DIR/NAME.onnx and its IO spec to
// DIR/NAME.yaml and returns both paths.
func (n *Net) WriteArtifacts(dir, name string, width int, aux AuxOptions) (model, spec string, err error) {
	m, err := n.Export(width, aux)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create %q: %w", dir, err)
	}
	model = filepath.Join(dir, name+".onnx")
	if err := onnx.WriteFile(model, m); err != nil {
		return "", "", fmt.Errorf("write %q: %w", model, err)
	}
	spec = filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(spec, []byte(n.IOSpecYAML(width)), 0o644); err != nil {
		return "", "", fmt.Errorf("write %q: %w", spec, err)
	}
	return model, spec, nil
}
