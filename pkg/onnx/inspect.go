package onnx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Summary is what `didoedge model inspect` prints.
type Summary struct {
	Path      string
	SHA256    string
	IRVersion int64
	Opsets    []OpsetID
	Producer  string
	Inputs    []ValueSummary
	Outputs   []ValueSummary
	Nodes     int
	Ops       map[string]int
}

// ValueSummary is one graph input or output.
type ValueSummary struct {
	Name  string
	Type  string
	Shape string
}

// Inspect reads a model file and summarises it.
func Inspect(path string) (*Summary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	m, err := Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("inspect %q: %w", path, err)
	}
	sum := sha256.Sum256(data)
	s := &Summary{
		Path:      path,
		SHA256:    hex.EncodeToString(sum[:]),
		IRVersion: m.IRVersion,
		Opsets:    m.OpsetImports,
		Producer:  strings.TrimSpace(m.ProducerName + " " + m.ProducerVersion),
		Nodes:     len(m.Graph.Nodes),
		Ops:       map[string]int{},
	}
	// Graph inputs that are also initializers are weights, not model inputs.
	inits := map[string]bool{}
	for _, t := range m.Graph.Initializers {
		inits[t.Name] = true
	}
	for _, v := range m.Graph.Inputs {
		if !inits[v.Name] {
			s.Inputs = append(s.Inputs, summarize(v))
		}
	}
	for _, v := range m.Graph.Outputs {
		s.Outputs = append(s.Outputs, summarize(v))
	}
	for _, n := range m.Graph.Nodes {
		s.Ops[n.OpType]++
	}
	return s, nil
}

func summarize(v *ValueInfo) ValueSummary {
	typ, shape := "unknown", "?"
	if v.Type != nil && v.Type.Tensor != nil {
		typ = DataTypeName(v.Type.Tensor.ElemType)
		shape = v.Type.Tensor.Shape.String()
	}
	return ValueSummary{Name: v.Name, Type: typ, Shape: shape}
}

// String renders a shape as (1,3,N,640); "?" for an unknown rank or dim.
func (s *Shape) String() string {
	if s == nil {
		return "?"
	}
	parts := make([]string, len(s.Dims))
	for i, d := range s.Dims {
		switch {
		case d.HasValue:
			parts[i] = fmt.Sprint(d.Value)
		case d.Param != "":
			parts[i] = d.Param
		default:
			parts[i] = "?"
		}
	}
	return "(" + strings.Join(parts, ",") + ")"
}

// Write prints the summary in a stable, human-readable form.
func (s *Summary) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "file:       %s\n", s.Path)
	fmt.Fprintf(&b, "sha256:     %s\n", s.SHA256)
	fmt.Fprintf(&b, "ir_version: %d\n", s.IRVersion)
	for _, o := range s.Opsets {
		d := o.Domain
		if d == "" {
			d = "ai.onnx"
		}
		fmt.Fprintf(&b, "opset:      %s %d\n", d, o.Version)
	}
	if s.Producer != "" {
		fmt.Fprintf(&b, "producer:   %s\n", s.Producer)
	}
	fmt.Fprintf(&b, "inputs:\n")
	for _, v := range s.Inputs {
		fmt.Fprintf(&b, "  %s %s %s\n", v.Name, v.Type, v.Shape)
	}
	fmt.Fprintf(&b, "outputs:\n")
	for _, v := range s.Outputs {
		fmt.Fprintf(&b, "  %s %s %s\n", v.Name, v.Type, v.Shape)
	}
	ops := make([]string, 0, len(s.Ops))
	for op, n := range s.Ops {
		ops = append(ops, fmt.Sprintf("%s:%d", op, n))
	}
	sort.Strings(ops)
	fmt.Fprintf(&b, "nodes:      %d (%s)\n", s.Nodes, strings.Join(ops, " "))
	_, err := io.WriteString(w, b.String())
	return err
}
