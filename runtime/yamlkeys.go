package runtime

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

var yamlNodeType = reflect.TypeOf(yaml.Node{})

// decodeStrict decodes one YAML document into out (a pointer to a struct),
// rejecting unknown keys with their key path, and rewriting yaml's "line N"
// type errors into the key path found on that line. Fields of type
// yaml.Node are kept raw and not checked here (their owner checks them).
func decodeStrict(data []byte, out any) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return err
	}
	if len(root.Content) == 0 {
		return errors.New("empty document")
	}
	lines := map[int]string{}
	if err := checkKeys(root.Content[0], reflect.TypeOf(out).Elem(), "", lines); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				msgs[i] = rewriteLine(m, lines)
			}
			return errors.New(strings.Join(msgs, "; "))
		}
		return err
	}
	return nil
}

var linePrefix = regexp.MustCompile(`^line (\d+): `)

func rewriteLine(msg string, lines map[int]string) string {
	m := linePrefix.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	n, _ := strconv.Atoi(m[1])
	if p, ok := lines[n]; ok {
		return p + ": " + msg[len(m[0]):] + " (line " + m[1] + ")"
	}
	return msg
}

func joinKey(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

// checkKeys walks node alongside type t and reports the first unknown key;
// it records the key path of every line for error messages.
func checkKeys(node *yaml.Node, t reflect.Type, path string, lines map[int]string) error {
	for node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == yamlNodeType {
		return nil
	}
	note := func(line int, p string) {
		if _, ok := lines[line]; !ok {
			lines[line] = p
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			return nil // the decoder reports the type error
		}
		fields := map[string]reflect.Type{}
		structFields(t, fields)
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, val := node.Content[i], node.Content[i+1]
			p := joinKey(path, key.Value)
			ft, ok := fields[key.Value]
			if !ok {
				return fmt.Errorf("%s: unknown key (line %d)", p, key.Line)
			}
			note(key.Line, p)
			if err := checkKeys(val, ft, p, lines); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if node.Kind != yaml.SequenceNode {
			return nil
		}
		for i, item := range node.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			note(item.Line, p)
			if err := checkKeys(item, t.Elem(), p, lines); err != nil {
				return err
			}
		}
	case reflect.Map:
		if node.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			p := joinKey(path, node.Content[i].Value)
			note(node.Content[i].Line, p)
			if err := checkKeys(node.Content[i+1], t.Elem(), p, lines); err != nil {
				return err
			}
		}
	}
	return nil
}

// structFields maps yaml key names to field types, following ",inline".
func structFields(t reflect.Type, into map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			structFields(ft, into)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		into[name] = f.Type
	}
}
