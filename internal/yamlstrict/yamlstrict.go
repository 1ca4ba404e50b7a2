package yamlstrict

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Decode decodes the first YAML document of data into out (a pointer to a
// struct). Unknown keys are rejected with their key path and line; type
// errors are rewritten from yaml's "line N" form to the key path on that
// line. Fields of type yaml.Node are kept raw and not checked (their owner
// parses them).
func Decode(data []byte, out any) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return err
	}
	if len(root.Content) == 0 {
		return errors.New("empty document")
	}
	idx := keyIndex{lines: map[int]string{}, scalars: map[int][]scalarAt{}}
	if err := idx.check(root.Content[0], reflect.TypeOf(out).Elem(), ""); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				msgs[i] = idx.rewrite(m)
			}
			return errors.New(strings.Join(msgs, "; "))
		}
		return err
	}
	return nil
}

var (
	yamlNodeType   = reflect.TypeOf(yaml.Node{})
	yamlLinePrefix = regexp.MustCompile(`^line (\d+): `)
	yamlBadValue   = regexp.MustCompile("cannot unmarshal !!\\w+ `([^`]*)`")
)

// keyIndex remembers, per source line, the path of the first key found on
// it and the paths of its scalar values, to turn yaml's "line N" errors
// into key paths.
type keyIndex struct {
	lines   map[int]string
	scalars map[int][]scalarAt
}

type scalarAt struct{ value, path string }

func (k keyIndex) rewrite(msg string) string {
	m := yamlLinePrefix.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	rest := msg[len(m[0]):]
	if v := yamlBadValue.FindStringSubmatch(rest); v != nil {
		var found []string
		for _, s := range k.scalars[line] {
			if s.value == v[1] {
				found = append(found, s.path)
			}
		}
		if len(found) == 1 {
			return found[0] + ": " + rest + " (line " + m[1] + ")"
		}
	}
	if p, ok := k.lines[line]; ok && p != "" {
		return p + ": " + rest + " (line " + m[1] + ")"
	}
	return msg
}

func (k keyIndex) note(line int, path string) {
	if _, ok := k.lines[line]; !ok {
		k.lines[line] = path
	}
}

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

// check walks node alongside type t and reports the first unknown key.
func (k keyIndex) check(node *yaml.Node, t reflect.Type, path string) error {
	for node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == yamlNodeType {
		return nil
	}
	if node.Kind == yaml.ScalarNode {
		k.scalars[node.Line] = append(k.scalars[node.Line], scalarAt{node.Value, path})
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			return nil // the decoder reports the type error
		}
		fields := map[string]reflect.Type{}
		collectFields(t, fields)
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, val := node.Content[i], node.Content[i+1]
			p := joinPath(path, key.Value)
			ft, ok := fields[key.Value]
			if !ok {
				return fmt.Errorf("%s: unknown key (line %d)", p, key.Line)
			}
			k.note(key.Line, p)
			if err := k.check(val, ft, p); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if node.Kind != yaml.SequenceNode {
			return nil
		}
		for i, item := range node.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			k.note(item.Line, p)
			if err := k.check(item, t.Elem(), p); err != nil {
				return err
			}
		}
	case reflect.Map:
		if node.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			p := joinPath(path, node.Content[i].Value)
			k.note(node.Content[i].Line, p)
			if err := k.check(node.Content[i+1], t.Elem(), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// collectFields maps yaml key names to field types, following ",inline".
func collectFields(t reflect.Type, into map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			collectFields(ft, into)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		into[name] = f.Type
	}
}
