package modeltool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// Summary describes a run directory (summary.json).
type Summary struct {
	Tool    string      `json:"tool"`
	GOARCH  string      `json:"goarch"`
	Height  int         `json:"height"`
	Width   int         `json:"width"`
	Frames  int         `json:"frames"`
	Seed    uint64      `json:"seed"`
	Library LibraryInfo `json:"library"`
	Models  []ModelInfo `json:"models"`
	Maps    []MapFile   `json:"maps"`
}

// LibraryInfo is the ONNX Runtime library a run used.
type LibraryInfo struct {
	Path    string `json:"path"`
	Source  string `json:"source"`
	Version string `json:"version"`
}

// ModelInfo is one model of a run and the execution provider it ran on.
type ModelInfo struct {
	Role     string `json:"role"` // depth or auxue
	Path     string `json:"path"`
	SHA256   string `json:"sha256"`
	Provider string `json:"provider"`
}

// MapFile is one frame's map: a raw float32 little-endian file of
// Height*Width values in the run directory.
type MapFile struct {
	Frame   int     `json:"frame"`
	Map     string  `json:"map"`
	File    string  `json:"file"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Mean    float64 `json:"mean"`
	Invalid int     `json:"invalid"` // depth values written as 0 (non-finite or not positive)
}

// mapFileName is the only file name a summary may reference: no directories,
// so a crafted summary cannot make Compare read outside its run directory.
var mapFileName = regexp.MustCompile(`^frame[0-9]{3,}_[a-z]+\.f32$`)

// maxMapValues bounds Height*Width so that a summary cannot ask for a huge
// allocation (4096x4096 is far beyond any model input here).
const maxMapValues = 1 << 24

// ParseSummary decodes and checks summary.json; source names it in errors.
func ParseSummary(data []byte, source string) (*Summary, error) {
	var s Summary
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("run summary %q: %w", source, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("run summary %q: trailing data after the JSON object", source)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("run summary %q: %w", source, err)
	}
	return &s, nil
}

// ReadSummary reads dir/summary.json.
func ReadSummary(dir string) (*Summary, error) {
	path := filepath.Join(dir, SummaryFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("run summary: %w", err)
	}
	return ParseSummary(data, path)
}

func (s *Summary) validate() error {
	if s.Height <= 0 || s.Width <= 0 || s.Height > maxMapValues/max(s.Width, 1) {
		return fmt.Errorf("height %d, width %d: must be positive with at most %d values", s.Height, s.Width, maxMapValues)
	}
	if s.Frames <= 0 || s.Frames > 1000 {
		return fmt.Errorf("frames: %d, want 1..1000", s.Frames)
	}
	roles := map[string]bool{}
	for i, m := range s.Models {
		if m.Role != "depth" && m.Role != "auxue" {
			return fmt.Errorf("models[%d].role: %q, want depth or auxue", i, m.Role)
		}
		if roles[m.Role] {
			return fmt.Errorf("models[%d].role: %q listed twice", i, m.Role)
		}
		roles[m.Role] = true
	}
	seen := map[[2]any]bool{}
	for i, m := range s.Maps {
		switch m.Map {
		case MapDepth, MapScale, MapEpistemic:
		default:
			return fmt.Errorf("maps[%d].map: %q, want depth, scale or epistemic", i, m.Map)
		}
		if m.Frame < 0 || m.Frame >= s.Frames {
			return fmt.Errorf("maps[%d].frame: %d outside 0..%d", i, m.Frame, s.Frames-1)
		}
		if !mapFileName.MatchString(m.File) {
			return fmt.Errorf("maps[%d].file: %q is not a frameNNN_map.f32 name", i, m.File)
		}
		key := [2]any{m.Frame, m.Map}
		if seen[key] {
			return fmt.Errorf("maps[%d]: frame %d map %s listed twice", i, m.Frame, m.Map)
		}
		seen[key] = true
	}
	if want := 3 * s.Frames; len(s.Maps) != want {
		return fmt.Errorf("maps: %d entries, want %d (depth, scale, epistemic per frame)", len(s.Maps), want)
	}
	return nil
}

// model returns the entry for a role, or a zero value.
func (s *Summary) model(role string) ModelInfo {
	for _, m := range s.Models {
		if m.Role == role {
			return m
		}
	}
	return ModelInfo{}
}

// Write prints the run's set-up (frames, architecture, library, providers)
// and each map's range.
func (s *Summary) Write(w io.Writer) {
	fmt.Fprintf(w, "%d frames %dx%d on %s, ONNX Runtime %s (%s, %s), providers depth=%s auxue=%s\n",
		s.Frames, s.Height, s.Width, s.GOARCH, s.Library.Version, s.Library.Path, s.Library.Source,
		s.Models[0].Provider, s.Models[1].Provider)
	for _, m := range s.Maps {
		fmt.Fprintf(w, "  %-24s min %10.4g  max %10.4g  mean %10.4g\n", m.File, m.Min, m.Max, m.Mean)
	}
}
