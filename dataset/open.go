package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Layouts a data directory may have (Open).
const (
	LayoutAuto  = "auto"  // sim when DIR/meta.json exists, nyu when DIR/rgb/ does, images when DIR holds pictures, else kitti
	LayoutSim   = "sim"   // what `didoedge sim render` writes (KITTI depth-completion layout + meta.json)
	LayoutKITTI = "kitti" // real KITTI: raw frames and annotated depth, selected by split files
	LayoutNYU   = "nyu"   // rgb/ and depth/ PNG pairs
)

// SplitAll selects every frame of a data set.
const SplitAll = "all"

// Set is a data set on disk, whatever its layout.
type Set interface {
	// Items lists the frames of a split: a split name (train, val, test,
	// all) or, for KITTI and NYU, a split file.
	Items(split string) ([]Item, error)
	// Load reads one frame.
	Load(it Item) (*Sample, error)
	// Layout names the layout (LayoutSim, LayoutKITTI, LayoutNYU).
	Layout() string
	// HasGroundTruth is false for a set declared without depth ground
	// truth (frames exported from a recording).
	HasGroundTruth() bool
}

// Source names a data set: a local directory, or any fs.FS (an S3 prefix).
type Source struct {
	// Dir names the data set's root: the directory read when FS is nil,
	// and the name errors and identities give it (an s3:// URL with FS).
	Dir string
	// FS, when set, is the data set's root (Dir is then only its name).
	FS     fs.FS
	Layout string // LayoutAuto when empty
	// KITTIDepth is the root of KITTI's annotated depth
	// (<root>/[train/|val/]<drive>/proj_depth/groundtruth/...); default Dir.
	// KITTIDepthFS reads it when set.
	KITTIDepth   string
	KITTIDepthFS fs.FS
	// NYUDepthScale is the NYU layout's depth PNG scale (default 1000, mm).
	NYUDepthScale float64
}

// Open opens the data set src names, detecting the layout when asked.
func Open(src Source) (Set, error) {
	if src.Dir == "" {
		return nil, errors.New("data set: no directory given")
	}
	fsys := dirFS(src.FS, src.Dir)
	st, err := fs.Stat(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("data set %s: %w", src.Dir, unwrapPath(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("data set %q: not a directory", src.Dir)
	}
	layout := src.Layout
	if layout == "" || layout == LayoutAuto {
		switch {
		case exists(fsys, MetaFile):
			layout = LayoutSim
		case exists(fsys, "rgb"):
			layout = LayoutNYU
		case hasImages(fsys):
			layout = LayoutImages
		default:
			layout = LayoutKITTI
		}
	}
	switch layout {
	case LayoutSim:
		d, err := OpenSimFS(fsys, src.Dir)
		if err != nil {
			return nil, err
		}
		return simSet{d}, nil
	case LayoutKITTI:
		depth, depthFS := src.KITTIDepth, src.KITTIDepthFS
		if depth == "" {
			depth, depthFS = src.Dir, fsys
		}
		return &kittiSet{k: &KITTI{RawDir: src.Dir, DepthDir: depth, RawFS: fsys, DepthFS: dirFS(depthFS, depth)}}, nil
	case LayoutNYU:
		return nyuSet{&NYU{Dir: src.Dir, FS: fsys, DepthScale: src.NYUDepthScale}}, nil
	case LayoutImages:
		return openImages(fsys, src.Dir)
	}
	return nil, fmt.Errorf("data set %q: layout %q is not one of auto, sim, kitti, nyu, images", src.Dir, layout)
}

type simSet struct{ *Sim }

func (s simSet) Layout() string { return LayoutSim }

func (s simSet) HasGroundTruth() bool { return s.Meta.HasGroundTruth() }

func (s simSet) Items(split string) ([]Item, error) {
	if split != SplitAll {
		items, err := s.Split(split)
		if err != nil {
			return nil, fmt.Errorf("data set %q: %w", s.Dir, err)
		}
		return items, nil
	}
	var out []Item
	for _, dr := range s.Meta.Drives {
		for k := 0; k < dr.Count; k++ {
			out = append(out, Item{Drive: dr.Name, Frame: dr.Index(k), Side: 'l'})
		}
	}
	return out, nil
}

type kittiSet struct{ k *KITTI }

func (s *kittiSet) Layout() string { return LayoutKITTI }

// HasGroundTruth: KITTI sets come with annotated depth.
func (s *kittiSet) HasGroundTruth() bool { return true }

func (s *kittiSet) Load(it Item) (*Sample, error) { return s.k.Load(it) }

// Items reads a split file: a local file of that path, or
// DIR/splits/<split>.txt in the data set (Eigen-style lines,
// ParseSplitList).
func (s *kittiSet) Items(split string) ([]Item, error) {
	if st, err := os.Stat(split); err == nil && !st.IsDir() {
		f, err := os.Open(split)
		if err != nil {
			return nil, fmt.Errorf("kitti data set %q: split %q: %w", s.k.RawDir, split, err)
		}
		defer f.Close()
		return ParseSplitList(f, split)
	}
	name := fsJoin(SplitsDir, split+".txt")
	if !fs.ValidPath(name) {
		return nil, fmt.Errorf("kitti data set %q: split %q: not a local file nor a name of %s", s.k.RawDir, split, display(s.k.RawDir, SplitsDir))
	}
	data, err := readFile(s.k.rawFS(), s.k.RawDir, name)
	if err != nil {
		return nil, fmt.Errorf("kitti data set %q: split %q: give a split file (Eigen-style lines) or put it in %s: %w",
			s.k.RawDir, split, display(s.k.RawDir, fsJoin(SplitsDir, "<split>.txt")), err)
	}
	return ParseSplitList(bytes.NewReader(data), display(s.k.RawDir, name))
}

type nyuSet struct{ *NYU }

func (s nyuSet) Layout() string { return LayoutNYU }

// HasGroundTruth: NYU sets come with dense depth.
func (s nyuSet) HasGroundTruth() bool { return true }

func (s nyuSet) Items(split string) ([]Item, error) {
	if split == SplitAll {
		split = ""
	}
	if split != "" && strings.ContainsAny(split, `/\`) {
		return nil, fmt.Errorf("nyu data set %q: split %q: give a name of %s/<name>.txt", s.Dir, split, SplitsDir)
	}
	items, err := s.NYU.Items(split)
	if err != nil {
		return nil, fmt.Errorf("nyu data set %q: %w", s.Dir, err)
	}
	return items, nil
}
