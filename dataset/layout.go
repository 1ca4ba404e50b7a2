package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// On-disk layout of a simulated data set (KITTI depth-completion-like):
//
//	DIR/meta.json
//	DIR/splits/{train,val,test}.txt                  "<drive> <frame>" lines
//	DIR/<drive>/image_02/data/%010d.png              RGB (nothing else lives here)
//	DIR/<drive>/proj_depth/groundtruth/image_02/%010d.png  sparse GT, uint16 m*256, 0 = none
//	DIR/<drive>/proj_depth/dense/image_02/%010d.png  dense depth, same encoding, sky = 0
//	DIR/<drive>/semantic/image_02/%010d.png          8-bit class ids
const (
	MetaFile   = "meta.json"
	SplitsDir  = "splits"
	MetaFormat = "didoedge-sim/1"
	// partialDir holds files being written; Generate removes it.
	partialDir = ".partial"
	// NoGroundTruth as Meta.Sparse (and Meta.Semantic) marks a data set of
	// frames alone, e.g. exported from a recording: only image_02 exists,
	// and Load returns samples with nil Sparse, Dense and Semantic.
	NoGroundTruth = "none"
)

// SplitNames returns the split names in their usual order.
func SplitNames() [3]string { return [3]string{"train", "val", "test"} }

// FramePaths are the files of one frame relative to the data-set root.
type FramePaths struct{ RGB, Sparse, Dense, Semantic string }

// SimFramePaths returns the layout's paths of frame index of drive,
// slash-separated (fs.FS names; filepath.Join takes them as they are).
func SimFramePaths(drive string, index int) FramePaths {
	name := fmt.Sprintf("%010d.png", index)
	return FramePaths{
		RGB:      path.Join(drive, "image_02", "data", name),
		Sparse:   path.Join(drive, "proj_depth", "groundtruth", "image_02", name),
		Dense:    path.Join(drive, "proj_depth", "dense", "image_02", name),
		Semantic: path.Join(drive, "semantic", "image_02", name),
	}
}

// Drive describes one simulated sequence.
type Drive struct {
	Name  string `json:"name"`
	Seed  int64  `json:"seed"`
	Split string `json:"split"`
	// Frames are rendered at indices First, First+Stride, ... (Count of them).
	First  int `json:"first"`
	Count  int `json:"count"`
	Stride int `json:"stride"`
}

// Index returns the sequence index of the k-th frame of the drive.
func (d Drive) Index(k int) int { return d.First + k*d.Stride }

// Meta is the content of meta.json.
type Meta struct {
	Format string `json:"format"`
	World  string `json:"world"`
	// Camera names the simulated camera (sim.Camera) when it is not the
	// training camera; empty for KITTI's and for data not simulated.
	Camera     string     `json:"camera,omitempty"`
	Seed       int64      `json:"seed"`
	Width      int        `json:"width"`
	Height     int        `json:"height"`
	Intrinsics Intrinsics `json:"intrinsics"`
	DepthScale float64    `json:"depth_scale"`
	// Semantic names the id set: "cityscapes" or "nyu40".
	Semantic string `json:"semantic"`
	// Sparse names the ground-truth sensor: "lidar-hdl64" or
	// "structured-light", or NoGroundTruth.
	Sparse string         `json:"sparse"`
	Drives []Drive        `json:"drives"`
	Counts map[string]int `json:"counts"`
}

// ParseMeta decodes and validates meta.json; name labels errors.
func ParseMeta(data []byte, name string) (Meta, error) {
	var m Meta
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("meta %q: %w", name, err)
	}
	if dec.More() {
		return m, fmt.Errorf("meta %q: trailing data after the JSON object", name)
	}
	bad := func(key string, v any) (Meta, error) {
		return m, fmt.Errorf("meta %q: key %q has invalid value %v", name, key, v)
	}
	switch {
	case m.Format != MetaFormat:
		return bad("format", m.Format)
	case m.World == "":
		return bad("world", m.World)
	case m.Width <= 0 || m.Width > 16384:
		return bad("width", m.Width)
	case m.Height <= 0 || m.Height > 16384:
		return bad("height", m.Height)
	case !(m.DepthScale > 0) || m.DepthScale > 1e6:
		return bad("depth_scale", m.DepthScale)
	case !(m.Intrinsics.Fx > 0) || !(m.Intrinsics.Fy > 0):
		return bad("intrinsics", m.Intrinsics)
	}
	seen := map[string]bool{}
	for i, d := range m.Drives {
		key := fmt.Sprintf("drives[%d]", i)
		if err := checkDriveName(d.Name); err != nil {
			return m, fmt.Errorf("meta %q: key %q: %w", name, key+".name", err)
		}
		if seen[d.Name] {
			return bad(key+".name", d.Name)
		}
		seen[d.Name] = true
		if d.Count < 0 || d.First < 0 || d.Stride <= 0 {
			return bad(key, fmt.Sprintf("first %d count %d stride %d", d.First, d.Count, d.Stride))
		}
		if !isSplit(d.Split) {
			return bad(key+".split", d.Split)
		}
	}
	return m, nil
}

func isSplit(s string) bool {
	for _, n := range SplitNames() {
		if s == n {
			return true
		}
	}
	return false
}

// checkDriveName refuses names that would escape the data-set directory.
func checkDriveName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, " \t\\") || strings.HasPrefix(name, "/") {
		return fmt.Errorf("invalid drive name %q", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("invalid drive name %q", name)
		}
	}
	return nil
}

// ParseSplitList reads a split list. Three line formats are accepted:
//
//	<drive> <frame>                      this package's lists
//	<date>/<drive> <frame> <l|r>         monodepth2 Eigen files
//	<rgb path> <depth path|None> <focal> BTS / AdaBins Eigen files
//
// Blank lines and lines starting with '#' are skipped. name labels errors.
func ParseSplitList(r io.Reader, name string) ([]Item, error) {
	var items []Item
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		it, err := parseSplitLine(text)
		if err != nil {
			return nil, fmt.Errorf("split list %q line %d: %w", name, line, err)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("split list %q: %w", name, err)
	}
	return items, nil
}

func parseFrame(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1e9 {
		return 0, fmt.Errorf("frame %q is not a non-negative integer", s)
	}
	return n, nil
}

func parseSplitLine(text string) (Item, error) {
	f := strings.Fields(text)
	switch {
	case len(f) == 2:
		n, err := parseFrame(f[1])
		if err != nil {
			return Item{}, err
		}
		if err := checkDriveName(f[0]); err != nil {
			return Item{}, err
		}
		return Item{Drive: f[0], Frame: n, Side: 'l'}, nil
	case len(f) == 3 && (f[2] == "l" || f[2] == "r"):
		n, err := parseFrame(f[1])
		if err != nil {
			return Item{}, err
		}
		if err := checkDriveName(f[0]); err != nil {
			return Item{}, err
		}
		return Item{Drive: f[0], Frame: n, Side: f[2][0]}, nil
	case len(f) == 3:
		focal, err := strconv.ParseFloat(f[2], 64)
		if err != nil || !(focal > 0) || focal > 1e6 {
			return Item{}, fmt.Errorf("focal %q is not a positive number", f[2])
		}
		it := Item{RGBPath: f[0], Focal: focal, Side: 'l'}
		if f[1] != "None" {
			it.DepthPath = f[1]
		}
		// .../<drive>/image_02/data/<frame>.png
		parts := strings.Split(f[0], "/")
		if len(parts) < 4 || parts[len(parts)-2] != "data" || !strings.HasPrefix(parts[len(parts)-3], "image_0") {
			return Item{}, fmt.Errorf("rgb path %q is not <drive>/image_0X/data/<frame>.png", f[0])
		}
		if parts[len(parts)-3] == "image_03" {
			it.Side = 'r'
		}
		it.Drive = strings.Join(parts[:len(parts)-3], "/")
		if err := checkDriveName(it.Drive); err != nil {
			return Item{}, err
		}
		base := strings.TrimSuffix(parts[len(parts)-1], filepath.Ext(parts[len(parts)-1]))
		n, err := parseFrame(base)
		if err != nil {
			return Item{}, err
		}
		it.Frame = n
		for _, p := range []string{it.RGBPath, it.DepthPath} {
			if strings.HasPrefix(p, "/") || strings.Contains(p, "..") {
				return Item{}, fmt.Errorf("path %q must be relative without ..", p)
			}
		}
		return it, nil
	}
	return Item{}, fmt.Errorf("want \"<drive> <frame>\", \"<drive> <frame> <l|r>\" or \"<rgb> <depth> <focal>\", got %d fields", len(f))
}

// FormatSplitList writes items as "<drive> <frame>" lines.
func FormatSplitList(w io.Writer, items []Item) error {
	bw := bufio.NewWriter(w)
	for _, it := range items {
		fmt.Fprintf(bw, "%s %d\n", it.Drive, it.Frame)
	}
	return bw.Flush()
}

// AssignSplits gives each of n drives a split, whole drives at a time so
// that near-identical consecutive frames never straddle two splits: about
// 10% of the drives (at least one when n >= 3) go to test, as many to val,
// the rest to train.
func AssignSplits(n int) []string {
	out := make([]string, n)
	nTest, nVal := 0, 0
	if n >= 3 {
		nTest = max(1, (n+5)/10)
		nVal = nTest
	}
	for i := range out {
		switch {
		case i >= n-nTest:
			out[i] = "test"
		case i >= n-nTest-nVal:
			out[i] = "val"
		default:
			out[i] = "train"
		}
	}
	return out
}

// DriveSeed derives the world seed of drive d from the data-set seed
// (splitmix64), so every drive has its own layout, sun and traffic.
func DriveSeed(seed int64, d int) int64 {
	z := uint64(seed) + uint64(d+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return int64((z ^ (z >> 31)) >> 1)
}

// HasGroundTruth reports whether the data set has depth and semantic maps
// beside its frames.
func (m Meta) HasGroundTruth() bool { return m.Sparse != NoGroundTruth }
