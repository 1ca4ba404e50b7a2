package dataset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Layouts a data directory may have (Open).
const (
	LayoutAuto  = "auto"  // sim when DIR/meta.json exists, nyu when DIR/rgb/ does, else kitti
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

// Source names a data set on disk.
type Source struct {
	Dir    string
	Layout string // LayoutAuto when empty
	// KITTIDepth is the root of KITTI's annotated depth
	// (<root>/[train/|val/]<drive>/proj_depth/groundtruth/...); default Dir.
	KITTIDepth string
	// NYUDepthScale is the NYU layout's depth PNG scale (default 1000, mm).
	NYUDepthScale float64
}

// Open opens the data set src names, detecting the layout when asked.
func Open(src Source) (Set, error) {
	if src.Dir == "" {
		return nil, errors.New("data set: no directory given")
	}
	st, err := os.Stat(src.Dir)
	if err != nil {
		return nil, fmt.Errorf("data set: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("data set %q: not a directory", src.Dir)
	}
	layout := src.Layout
	if layout == "" || layout == LayoutAuto {
		switch {
		case exists(filepath.Join(src.Dir, MetaFile)):
			layout = LayoutSim
		case exists(filepath.Join(src.Dir, "rgb")):
			layout = LayoutNYU
		default:
			layout = LayoutKITTI
		}
	}
	switch layout {
	case LayoutSim:
		d, err := OpenSim(src.Dir)
		if err != nil {
			return nil, err
		}
		return simSet{d}, nil
	case LayoutKITTI:
		depth := src.KITTIDepth
		if depth == "" {
			depth = src.Dir
		}
		return &kittiSet{k: &KITTI{RawDir: src.Dir, DepthDir: depth}}, nil
	case LayoutNYU:
		return nyuSet{&NYU{Dir: src.Dir, DepthScale: src.NYUDepthScale}}, nil
	}
	return nil, fmt.Errorf("data set %q: layout %q is not one of auto, sim, kitti, nyu", src.Dir, layout)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
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

// Items reads a split file: the path itself, or DIR/splits/<split>.txt
// (Eigen-style lines, ParseSplitList).
func (s *kittiSet) Items(split string) ([]Item, error) {
	path := split
	if !exists(path) {
		path = filepath.Join(s.k.RawDir, SplitsDir, split+".txt")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kitti data set %q: split %q: give a split file (Eigen-style lines) or put it in %s: %w",
			s.k.RawDir, split, filepath.Join(s.k.RawDir, SplitsDir, "<split>.txt"), err)
	}
	defer f.Close()
	return ParseSplitList(f, path)
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
