package control

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// yamlDoc is a config file's YAML document, edited key by key so that
// everything else (comments, order, other sections) stays as written.
type yamlDoc struct {
	root *yaml.Node // the document's top mapping
}

// set puts v at path (mapping keys as strings, sequence indexes as ints),
// creating mappings on the way; present false removes the key.
func (d *yamlDoc) set(path []any, v any, present bool) error {
	n := d.root
	for i, p := range path {
		last := i == len(path)-1
		switch key := p.(type) {
		case int:
			if n.Kind != yaml.SequenceNode || key < 0 || key >= len(n.Content) {
				return fmt.Errorf("config file: %v: no item %d", path[:i], key)
			}
			n = n.Content[key]
		case string:
			if n.Kind != yaml.MappingNode {
				return fmt.Errorf("config file: %v is not a mapping", path[:i])
			}
			j := -1
			for k := 0; k+1 < len(n.Content); k += 2 {
				if n.Content[k].Value == key {
					j = k
				}
			}
			if last {
				if !present {
					if j >= 0 {
						n.Content = append(n.Content[:j], n.Content[j+2:]...)
					}
					return nil
				}
				var val yaml.Node
				if err := val.Encode(v); err != nil {
					return fmt.Errorf("config file: %v: %w", path, err)
				}
				if j >= 0 {
					n.Content[j+1] = &val
				} else {
					n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, &val)
				}
				return nil
			}
			if j < 0 {
				if !present {
					return nil // nothing to remove
				}
				m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, m)
				n = m
				continue
			}
			n = n.Content[j+1]
		default:
			return fmt.Errorf("config file: bad path element %v", p)
		}
	}
	return nil
}

// get returns the node at path (mapping keys, sequence indexes), nil
// when a key is missing.
func (d *yamlDoc) get(path ...any) *yaml.Node {
	n := d.root
	for _, p := range path {
		switch key := p.(type) {
		case int:
			if n.Kind != yaml.SequenceNode || key < 0 || key >= len(n.Content) {
				return nil
			}
			n = n.Content[key]
		case string:
			if n.Kind != yaml.MappingNode {
				return nil
			}
			var next *yaml.Node
			for k := 0; k+1 < len(n.Content); k += 2 {
				if n.Content[k].Value == key {
					next = n.Content[k+1]
				}
			}
			if next == nil {
				return nil
			}
			n = next
		default:
			return nil
		}
	}
	return n
}

// cameraPath is the key path of a camera's section in the file: the
// cameras item with its name, or the alerts section of the single camera
// form (whose zones are the alerts section's). A camera the file does not
// hold (added at run time without persist) is an error.
func (d *yamlDoc) cameraPath(name string) ([]any, error) {
	if list := d.get("cameras"); list != nil && list.Kind == yaml.SequenceNode {
		for i := range list.Content {
			if n := d.get("cameras", i, "name"); n != nil && n.Value == name {
				return []any{"cameras", i}, nil
			}
		}
	} else if d.get("camera") != nil {
		if n := d.get("alerts", "camera"); n != nil && n.Value == name {
			return []any{"alerts"}, nil
		}
	}
	return nil, fmt.Errorf("config file: no camera %q in it (a camera added at run time without persist=1 is not in the file)", name)
}

// addCamera appends a cameras item (item: its mapping node); a file in
// the single camera form becomes a cameras list first, its camera
// section the first item, named alerts.camera (which goes).
func (d *yamlDoc) addCamera(item *yaml.Node) error {
	root := d.root
	if d.get("cameras") == nil {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		placed := false
		for k := 0; k+1 < len(root.Content); k += 2 {
			if root.Content[k].Value != "camera" {
				continue
			}
			cam := root.Content[k+1]
			name := d.get("alerts", "camera")
			if cam.Kind != yaml.MappingNode || name == nil {
				return errors.New("config file: camera: not a mapping, or alerts.camera missing: cannot turn it into a cameras list")
			}
			first := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: append([]*yaml.Node{
				{Kind: yaml.ScalarNode, Tag: "!!str", Value: "name"}, {Kind: yaml.ScalarNode, Tag: "!!str", Value: name.Value}}, cam.Content...)}
			seq.Content = append(seq.Content, first)
			root.Content[k].Value, root.Content[k+1] = "cameras", seq
			placed = true
			if err := d.set([]any{"alerts", "camera"}, nil, false); err != nil {
				return err
			}
			break
		}
		if !placed {
			root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "cameras"}, seq)
		}
	}
	list := d.get("cameras")
	if list.Kind != yaml.SequenceNode {
		return errors.New("config file: cameras is not a list")
	}
	list.Style = 0
	list.Content = append(list.Content, item)
	return nil
}

// removeCamera deletes the named cameras item.
func (d *yamlDoc) removeCamera(name string) error {
	path, err := d.cameraPath(name)
	if err != nil {
		return err
	}
	if len(path) != 2 {
		return fmt.Errorf("config file: camera %q is the single camera section", name)
	}
	list := d.get("cameras")
	i := path[1].(int)
	list.Content = append(list.Content[:i], list.Content[i+1:]...)
	return nil
}

// blockStyle makes a node decoded from JSON read as the file's YAML does:
// mappings and lists in block style, lists of scalars (polygon points)
// and empty ones in flow style, scalars plain (the encoder still quotes
// a string that would read as another type).
func blockStyle(n *yaml.Node) {
	switch n.Kind {
	case yaml.ScalarNode:
		n.Style = 0
	case yaml.MappingNode:
		n.Style = 0
	case yaml.SequenceNode:
		n.Style = yaml.FlowStyle
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode && !(c.Kind == yaml.SequenceNode && allScalars(c)) {
				n.Style = 0
			}
		}
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
	if n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		n.Style = yaml.FlowStyle
	}
}

func allScalars(n *yaml.Node) bool {
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}

// pendingWrite is an edited config file written beside its target and
// checked, waiting to replace it (commit) or to go (abort).
type pendingWrite struct {
	tmp, target string
}

// prepareWrite edits the config file at path with edit and writes the
// result to a temporary file beside the file's real target (path may be
// a symlink: the link stays and its target is replaced), with the
// target's mode and owner, after checking that the result loads (every
// key validated as at start-up, relative paths as path's). It refuses,
// before anything is applied, a file that cannot be replaced: read-only
// by its mode (0444 is the operator's "do not touch"), immutable, in a
// directory that cannot be written, or on a full disk.
func prepareWrite(path string, edit func(*yamlDoc) error) (*pendingWrite, error) {
	if path == "" {
		return nil, errors.New("the configuration was not read from a file (built-in defaults): nothing to write to")
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	st, err := os.Stat(target)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", target, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("config file %s: not a regular file", target)
	}
	if st.Mode().Perm()&0o222 == 0 {
		return nil, fmt.Errorf("config file %s: read-only (mode %04o): not replaced; make it writable to persist changes", target, st.Mode().Perm())
	}
	// Open for writing (without truncating) to learn what the mode does
	// not say: an immutable or append-only file, a read-only mount.
	f, err := os.OpenFile(target, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("config file %s cannot be written: %w", target, err)
	}
	f.Close()
	data, err := boundedfile.Read("", target, boundedfile.Config)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", target, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a YAML mapping", target)
	}
	if err := edit(&yamlDoc{root: doc.Content[0]}); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", target, err)
	}
	enc.Close()
	// The file must still load: a change that validates in memory but not
	// in the file (a key path this writer got wrong) must not reach disk.
	if _, err := runconfig.Parse(path, buf.Bytes(), filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("the edited file does not load, not written: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return nil, fmt.Errorf("config file %s: cannot write beside it: %w", target, err)
	}
	w := &pendingWrite{tmp: tmp.Name(), target: target}
	err = func() error {
		defer tmp.Close()
		if _, err := tmp.Write(buf.Bytes()); err != nil {
			return err
		}
		if err := tmp.Chmod(st.Mode().Perm()); err != nil {
			return err
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && (int(sys.Uid) != os.Getuid() || int(sys.Gid) != os.Getgid()) {
			if err := tmp.Chown(int(sys.Uid), int(sys.Gid)); err != nil {
				return fmt.Errorf("cannot keep its owner %d:%d: %w", sys.Uid, sys.Gid, err)
			}
		}
		return tmp.Sync()
	}()
	if err != nil {
		w.abort()
		return nil, fmt.Errorf("config file %s: %w", target, err)
	}
	return w, nil
}

// commit replaces the target with the edited file (an atomic rename in
// the target's directory).
func (w *pendingWrite) commit() error {
	if err := os.Rename(w.tmp, w.target); err != nil {
		w.abort()
		return fmt.Errorf("config file %s: %w", w.target, err)
	}
	return nil
}

// abort removes the edited file.
func (w *pendingWrite) abort() { os.Remove(w.tmp) }
