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
// parses them). Aliases, anchors and merge keys (<<) are followed; each
// aliased node is checked once per type, so that an alias bomb costs
// the walk no more than its own size (yaml.v3 itself refuses the excessive
// aliasing when it decodes).
//
// Errors may quote the document (an unknown key's name, a value of the
// wrong type): use Decode for a document its reader wrote (the config file
// given on the command line, a request's body).
func Decode(data []byte, out any) error { return decode(data, out, false) }

// DecodeRedacted is Decode with errors that never quote the document: they
// give the line and the key path as the schema names it (a map's keys are
// written *), the YAML and Go types, never a key or a value of the file.
// Use it for a file named by a key (a calibration, an IO spec, a file a
// request names): that file may be anything readable, say a secret, and
// its first line must not come back in an error.
func DecodeRedacted(data []byte, out any) error { return decode(data, out, true) }

// Redact rewrites an error of yaml.v3's own Unmarshal or Decode (a lax
// parse of a file named by a key) as DecodeRedacted writes its errors:
// lines and types, never the file's keys or values. Other errors are
// returned as they are; nil stays nil.
func Redact(err error) error {
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		k := keyIndex{redact: true}
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = k.rewrite(m)
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	if strings.HasPrefix(err.Error(), "yaml: ") && err.Error() != "yaml: document contains excessive aliasing" {
		return redactSyntax(err)
	}
	return err
}

// maxWalk bounds the strict walk: (node, type) pairs visited. A document
// of the biggest accepted config file (4 MiB) has fewer nodes.
const maxWalk = 4 << 20

func decode(data []byte, out any, redact bool) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		if redact {
			return redactSyntax(err)
		}
		return err
	}
	if len(root.Content) == 0 {
		return errors.New("empty document")
	}
	idx := keyIndex{lines: map[int]notedPath{}, scalars: map[int][]scalarAt{}, seen: map[visit]bool{}, redact: redact}
	if err := idx.check(root.Content[0], reflect.TypeOf(out).Elem(), "", ""); err != nil {
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
		if redact && err.Error() != "yaml: document contains excessive aliasing" {
			return redactSyntax(err)
		}
		return err
	}
	return nil
}

var (
	yamlNodeType   = reflect.TypeOf(yaml.Node{})
	yamlLinePrefix = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)
	yamlBadValue   = regexp.MustCompile("cannot unmarshal !!\\w+ `([^`]*)`")
	// yamlTypeError is yaml.v3's type error after its line prefix: the
	// tag, the value (cut to 7 characters and "..."), the Go type.
	yamlTypeError = regexp.MustCompile("^cannot unmarshal (\\S+)(?: `[^`]*`)? into (.+)$")
	yamlDuplicate = regexp.MustCompile(`^mapping key .* already defined at line (\d+)$`)
	standardTags  = map[string]bool{"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true,
		"!!seq": true, "!!map": true, "!!timestamp": true, "!!binary": true}
)

// redactSyntax keeps of a yaml error only its line.
func redactSyntax(err error) error {
	if m := yamlLinePrefix.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("line %s: not valid YAML", m[1])
	}
	return errors.New("not valid YAML")
}

// keyIndex remembers, per source line, the path of the first key found on
// it and the paths of its scalar values, to turn yaml's "line N" errors
// into key paths.
type keyIndex struct {
	lines   map[int]notedPath
	scalars map[int][]scalarAt
	seen    map[visit]bool
	walked  int
	redact  bool
}

// notedPath is a key path as the file spells it and as the schema names
// it (map keys as *).
type notedPath struct{ path, safe string }

type scalarAt struct{ value, path, safe string }

type visit struct {
	node *yaml.Node
	t    reflect.Type
}

func (k *keyIndex) rewrite(msg string) string {
	m := yamlLinePrefix.FindStringSubmatch(msg)
	if m == nil {
		if k.redact {
			return "invalid value"
		}
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	rest := msg[len(m[0]):]
	path, safe := k.lines[line].path, k.lines[line].safe
	if v := yamlBadValue.FindStringSubmatch(rest); v != nil {
		var found []scalarAt
		for _, s := range k.scalars[line] {
			// yaml.v3 cuts values over 10 characters to 7 and "...".
			if s.value == v[1] || (strings.HasSuffix(v[1], "...") && len(s.value) > 10 && strings.HasPrefix(s.value, strings.TrimSuffix(v[1], "..."))) {
				found = append(found, s)
			}
		}
		if len(found) == 1 {
			path, safe = found[0].path, found[0].safe
		}
	}
	if !k.redact {
		if path != "" {
			return path + ": " + rest + " (line " + m[1] + ")"
		}
		return msg
	}
	switch t := yamlTypeError.FindStringSubmatch(rest); {
	case t != nil:
		tag := t[1]
		if !standardTags[tag] {
			tag = "a tagged value"
		}
		rest = "cannot unmarshal " + tag + " into " + t[2]
	case yamlDuplicate.MatchString(rest):
		rest = "a key given twice (first at line " + yamlDuplicate.FindStringSubmatch(rest)[1] + ")"
	default:
		rest = "invalid value"
	}
	if safe != "" {
		return safe + ": " + rest + " (line " + m[1] + ")"
	}
	return "line " + m[1] + ": " + rest
}

func (k *keyIndex) note(line int, path, safe string) {
	if _, ok := k.lines[line]; !ok {
		k.lines[line] = notedPath{path, safe}
	}
}

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

// check walks node alongside type t and reports the first unknown key;
// path and safe name node as the file and as the schema spell it.
func (k *keyIndex) check(node *yaml.Node, t reflect.Type, path, safe string) error {
	for node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == yamlNodeType {
		return nil
	}
	// An anchored node reached again through an alias was checked against
	// this type already: its keys are the same, its errors too. Without
	// this an alias bomb (9 aliases of 9 aliases ...) expands here.
	v := visit{node, t}
	if k.seen[v] {
		return nil
	}
	k.seen[v] = true
	if k.walked++; k.walked > maxWalk {
		return fmt.Errorf("document too large: over %d nodes", maxWalk)
	}
	if node.Kind == yaml.ScalarNode {
		k.scalars[node.Line] = append(k.scalars[node.Line], scalarAt{node.Value, path, safe})
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
			if isMerge(key) {
				if err := k.checkMerge(val, t, path, safe); err != nil {
					return err
				}
				continue
			}
			ft, ok := fields[key.Value]
			if !ok && fields[inlineMapKey] != nil {
				ft, ok = fields[inlineMapKey].Elem(), true
			}
			if !ok {
				if k.redact {
					if safe == "" {
						return fmt.Errorf("line %d: unknown key", key.Line)
					}
					return fmt.Errorf("%s: unknown key (line %d)", safe, key.Line)
				}
				return fmt.Errorf("%s: unknown key (line %d)", joinPath(path, key.Value), key.Line)
			}
			p, s := joinPath(path, key.Value), joinPath(safe, key.Value)
			k.note(key.Line, p, s)
			if err := k.check(val, ft, p, s); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if node.Kind != yaml.SequenceNode {
			return nil
		}
		for i, item := range node.Content {
			p, s := fmt.Sprintf("%s[%d]", path, i), fmt.Sprintf("%s[%d]", safe, i)
			k.note(item.Line, p, s)
			if err := k.check(item, t.Elem(), p, s); err != nil {
				return err
			}
		}
	case reflect.Map:
		if node.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			if isMerge(node.Content[i]) {
				if err := k.checkMerge(node.Content[i+1], t, path, safe); err != nil {
					return err
				}
				continue
			}
			p, s := joinPath(path, node.Content[i].Value), joinPath(safe, "*")
			k.note(node.Content[i].Line, p, s)
			if err := k.check(node.Content[i+1], t.Elem(), p, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// isMerge reports a merge key (<<): its mappings' keys become the keys of
// the mapping that holds it.
func isMerge(key *yaml.Node) bool {
	return key.Kind == yaml.ScalarNode && key.Value == "<<" && (key.Tag == "" || key.Tag == "!!merge")
}

// checkMerge checks the value of a merge key, a mapping or a sequence of
// mappings (or aliases of them), as keys of type t at path.
func (k *keyIndex) checkMerge(val *yaml.Node, t reflect.Type, path, safe string) error {
	for val.Kind == yaml.AliasNode && val.Alias != nil {
		val = val.Alias
	}
	if val.Kind == yaml.SequenceNode {
		for _, item := range val.Content {
			if err := k.check(item, t, path, safe); err != nil {
				return err
			}
		}
		return nil
	}
	return k.check(val, t, path, safe)
}

// inlineMapKey holds in collectFields' map the type of an inline map
// (",inline" on a map field: it takes every other key); no YAML key is
// empty after a Cut.
const inlineMapKey = ""

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
			switch ft.Kind() {
			case reflect.Struct:
				collectFields(ft, into)
			case reflect.Map:
				into[inlineMapKey] = ft
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		into[name] = f.Type
	}
}
