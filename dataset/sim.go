package dataset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
)

func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc
}

// Sim is a simulated data set on disk (the layout Generate writes).
type Sim struct {
	// Dir names the data set's root in messages (a directory or an s3://
	// URL); FS reads it.
	Dir  string
	FS   fs.FS
	Meta Meta
	// known drive names, to reject split lines naming other directories
	drives map[string]bool
}

// OpenSim reads DIR/meta.json.
func OpenSim(dir string) (*Sim, error) { return OpenSimFS(os.DirFS(dir), dir) }

// OpenSimFS reads meta.json at the root of fsys; root names that root in
// messages.
func OpenSimFS(fsys fs.FS, root string) (*Sim, error) {
	data, err := readFile(fsys, root, MetaFile)
	if err != nil {
		return nil, fmt.Errorf("open sim data set: %w", err)
	}
	m, err := ParseMeta(data, display(root, MetaFile))
	if err != nil {
		return nil, err
	}
	d := &Sim{Dir: root, FS: fsys, Meta: m, drives: map[string]bool{}}
	for _, dr := range m.Drives {
		d.drives[dr.Name] = true
	}
	return d, nil
}

// Split reads DIR/splits/<name>.txt.
func (d *Sim) Split(name string) ([]Item, error) {
	if !isSplit(name) {
		return nil, fmt.Errorf("unknown split %q (want train, val or test)", name)
	}
	name = fsJoin(SplitsDir, name+".txt")
	path := display(d.Dir, name)
	data, err := readFile(d.FS, d.Dir, name)
	if err != nil {
		return nil, err
	}
	items, err := ParseSplitList(bytes.NewReader(data), path)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if !d.drives[it.Drive] {
			return nil, fmt.Errorf("split list %q: drive %q is not in %s", path, it.Drive, MetaFile)
		}
	}
	return items, nil
}

// Load reads the four maps of one frame and checks them against meta.json;
// a data set without ground truth (Meta.Sparse == NoGroundTruth) has the
// RGB frame alone.
func (d *Sim) Load(it Item) (*Sample, error) {
	if !d.drives[it.Drive] {
		return nil, fmt.Errorf("load: drive %q is not in %s", it.Drive, MetaFile)
	}
	p := SimFramePaths(it.Drive, it.Frame)
	s := &Sample{Drive: it.Drive, Frame: it.Frame, Name: fmt.Sprintf("%s/%010d", it.Drive, it.Frame),
		Width: d.Meta.Width, Height: d.Meta.Height, Intrinsics: d.Meta.Intrinsics}
	check := func(path string, w, h int) error {
		if w != d.Meta.Width || h != d.Meta.Height {
			return fmt.Errorf("%q is %dx%d, meta.json says %dx%d", path, w, h, d.Meta.Width, d.Meta.Height)
		}
		return nil
	}
	var w, h int
	var err error
	path := display(d.Dir, p.RGB)
	if w, h, s.RGB, err = readRGB(d.FS, d.Dir, p.RGB); err != nil {
		return nil, err
	}
	if err := check(path, w, h); err != nil {
		return nil, err
	}
	if !d.Meta.HasGroundTruth() {
		return s, nil
	}
	path = display(d.Dir, p.Sparse)
	if w, h, s.Sparse, err = readDepth(d.FS, d.Dir, p.Sparse, d.Meta.DepthScale); err != nil {
		return nil, err
	}
	if err := check(path, w, h); err != nil {
		return nil, err
	}
	path = display(d.Dir, p.Dense)
	if w, h, s.Dense, err = readDepth(d.FS, d.Dir, p.Dense, d.Meta.DepthScale); err != nil {
		return nil, err
	}
	if err := check(path, w, h); err != nil {
		return nil, err
	}
	path = display(d.Dir, p.Semantic)
	if w, h, s.Semantic, err = readLabels(d.FS, d.Dir, p.Semantic); err != nil {
		return nil, err
	}
	if err := check(path, w, h); err != nil {
		return nil, err
	}
	return s, nil
}
