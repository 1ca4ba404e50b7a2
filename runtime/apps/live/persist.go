package live

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

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

// writeBack edits the config file at path with edit, checks that the
// result loads (every key validated, as at start-up) and replaces the
// file atomically, keeping its mode.
func writeBack(path string, edit func(*yamlDoc) error) error {
	if path == "" {
		return errors.New("the configuration was not read from a file (built-in defaults): nothing to write to")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a YAML mapping", path)
	}
	if err := edit(&yamlDoc{root: doc.Content[0]}); err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	enc.Close()
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// The file must still load: a change that validates in memory but not
	// in the file (a key path this writer got wrong) must not reach disk.
	if _, err := runconfig.Load(tmp.Name()); err != nil {
		return fmt.Errorf("the edited file does not load, not written: %w", err)
	}
	if err := os.Chmod(tmp.Name(), st.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
