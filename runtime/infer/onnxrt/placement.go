package onnxrt

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// ProviderNodes is how many nodes of a session's graph ONNX Runtime
// assigned to one execution provider, after its graph optimizations (a
// fused TensorRT subgraph counts each node it holds).
type ProviderNodes struct {
	// Provider is ONNX Runtime's name: CUDAExecutionProvider,
	// TensorrtExecutionProvider, CPUExecutionProvider.
	Provider string `json:"provider"`
	Nodes    int    `json:"nodes"`
	// Ops counts the nodes per operator type.
	Ops map[string]int `json:"ops,omitempty"`
}

// Placement is ONNX Runtime's own record of where a session's nodes run
// (OrtApi Session_GetEpGraphAssignmentInfo), in the order ONNX Runtime
// reported the providers; nil when the library cannot tell (older than
// 1.29.0).
type Placement []ProviderNodes

// Nodes returns the nodes assigned to the provider with ONNX Runtime's
// name ep.
func (pl Placement) Nodes(ep string) int {
	for _, p := range pl {
		if p.Provider == ep {
			return p.Nodes
		}
	}
	return 0
}

// Main is the provider that runs most nodes ("" when unknown).
func (pl Placement) Main() string {
	best, n := "", -1
	for _, p := range pl {
		if p.Nodes > n {
			best, n = p.Provider, p.Nodes
		}
	}
	return best
}

// String is "CUDAExecutionProvider 58, CPUExecutionProvider 3 (Gather 1,
// Shape 2)": the nodes per provider, with the operator types of every
// provider but the main one; "unknown" without a placement.
func (pl Placement) String() string {
	if len(pl) == 0 {
		return "unknown"
	}
	main := pl.Main()
	parts := make([]string, len(pl))
	for i, p := range pl {
		parts[i] = fmt.Sprintf("%s %d", p.Provider, p.Nodes)
		if p.Provider != main && len(p.Ops) > 0 {
			var ops []string
			for _, op := range slices.Sorted(maps.Keys(p.Ops)) {
				ops = append(ops, fmt.Sprintf("%s %d", op, p.Ops[op]))
			}
			parts[i] += " (" + strings.Join(ops, ", ") + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// placementConfigKey makes ONNX Runtime record the node placement at
// session creation (onnxruntime_session_options_config_keys.h).
const placementConfigKey = "session.record_ep_graph_assignment_info"

// RecordsPlacement reports whether the library serves the placement calls.
func RecordsPlacement(lib Library) bool { return versionAtLeast(lib.Version, AssignmentMinVersion) }

// RecordPlacement asks ONNX Runtime to record the node placement of the
// session created with opts, when the library can tell it.
func RecordPlacement(opts *ort.SessionOptions, lib Library) error {
	if !RecordsPlacement(lib) {
		return nil
	}
	if err := opts.AddSessionConfigEntry(placementConfigKey, "1"); err != nil {
		return fmt.Errorf("session options: %s: %w", placementConfigKey, err)
	}
	return nil
}
