package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"sort"
	"strings"
)

//go:embed *.json
var files embed.FS

// Names of the embedded schemas.
const (
	Event        = "event.v1.json"
	State        = "state.v1.json"
	Stats        = "stats.v1.json"
	Availability = "availability.v1.json"
	// HomeAssistantDiscovery describes Home Assistant's MQTT discovery
	// config of a binary_sensor or sensor, from its documented keys.
	HomeAssistantDiscovery = "ha-discovery.json"
)

// Load compiles one embedded schema by file name.
func Load(name string) (*Schema, error) {
	raw, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("load schema %q: %w", name, err)
	}
	s, err := Compile(raw)
	if err != nil {
		return nil, fmt.Errorf("load schema %q: %w", name, err)
	}
	return s, nil
}

// Raw returns the bytes of one embedded schema document (e.g. for the
// jsonschema schema records of an MCAP recording).
func Raw(name string) ([]byte, error) {
	raw, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("schema %q: %w", name, err)
	}
	return raw, nil
}

// Names lists the embedded schema files.
func Names() []string {
	ents, _ := files.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// Schema is a compiled schema node.
type Schema struct {
	types      []string
	required   []string
	properties map[string]*Schema
	closed     bool // additionalProperties: false
	enum       []any
	constVal   any
	hasConst   bool
	minimum    *big.Float
	maximum    *big.Float
	pattern    *regexp.Regexp
	items      *Schema
}

var annotations = map[string]bool{"$schema": true, "$id": true, "title": true, "description": true, "$comment": true}

// Compile parses a schema document.
func Compile(raw []byte) (*Schema, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, err
	}
	return compile(v, "#")
}

func compile(v any, path string) (*Schema, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: schema must be an object", path)
	}
	s := &Schema{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := m[k]
		p := path + "/" + k
		switch k {
		case "type":
			switch t := val.(type) {
			case string:
				s.types = []string{t}
			case []any:
				for _, x := range t {
					str, ok := x.(string)
					if !ok {
						return nil, fmt.Errorf("%s: type names must be strings", p)
					}
					s.types = append(s.types, str)
				}
			default:
				return nil, fmt.Errorf("%s: must be a string or an array", p)
			}
			for _, t := range s.types {
				switch t {
				case "object", "array", "string", "number", "integer", "boolean", "null":
				default:
					return nil, fmt.Errorf("%s: unknown type %q", p, t)
				}
			}
		case "required":
			arr, ok := val.([]any)
			if !ok {
				return nil, fmt.Errorf("%s: must be an array", p)
			}
			for _, x := range arr {
				str, ok := x.(string)
				if !ok {
					return nil, fmt.Errorf("%s: must hold strings", p)
				}
				s.required = append(s.required, str)
			}
		case "properties":
			pm, ok := val.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: must be an object", p)
			}
			s.properties = map[string]*Schema{}
			for name, sub := range pm {
				c, err := compile(sub, p+"/"+name)
				if err != nil {
					return nil, err
				}
				s.properties[name] = c
			}
		case "additionalProperties":
			b, ok := val.(bool)
			if !ok {
				return nil, fmt.Errorf("%s: only a boolean is supported", p)
			}
			s.closed = !b
		case "enum":
			arr, ok := val.([]any)
			if !ok || len(arr) == 0 {
				return nil, fmt.Errorf("%s: must be a non-empty array", p)
			}
			s.enum = arr
		case "const":
			s.constVal, s.hasConst = val, true
		case "minimum", "maximum":
			n, ok := val.(json.Number)
			if !ok {
				return nil, fmt.Errorf("%s: must be a number", p)
			}
			f, _, err := big.ParseFloat(string(n), 10, 200, big.ToNearestEven)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if k == "minimum" {
				s.minimum = f
			} else {
				s.maximum = f
			}
		case "pattern":
			str, ok := val.(string)
			if !ok {
				return nil, fmt.Errorf("%s: must be a string", p)
			}
			re, err := regexp.Compile(str)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			s.pattern = re
		case "items":
			c, err := compile(val, p)
			if err != nil {
				return nil, err
			}
			s.items = c
		default:
			if !annotations[k] {
				return nil, fmt.Errorf("%s: keyword not supported by this validator", p)
			}
		}
	}
	return s, nil
}

// decode parses one JSON value keeping numbers exact.
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid JSON: trailing data")
	}
	return v, nil
}

// Validate checks a JSON document against the schema; the error lists
// every violation with its JSON pointer.
func (s *Schema) Validate(doc []byte) error {
	v, err := decode(doc)
	if err != nil {
		return err
	}
	return s.ValidateValue(v)
}

// ValidateValue checks an already decoded value (numbers as json.Number).
func (s *Schema) ValidateValue(v any) error {
	var errs []string
	s.check(v, "", &errs)
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, ok := new(big.Int).SetString(string(x), 10); ok {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func (s *Schema) check(v any, path string, errs *[]string) {
	at := path
	if at == "" {
		at = "/"
	}
	fail := func(format string, args ...any) {
		*errs = append(*errs, at+": "+fmt.Sprintf(format, args...))
	}
	t := typeOf(v)
	if len(s.types) > 0 {
		ok := false
		for _, want := range s.types {
			if want == t || (want == "number" && t == "integer") || (want == "integer" && t == "number" && isIntegral(v)) {
				ok = true
			}
		}
		if !ok {
			fail("type %s, want %s", t, strings.Join(s.types, " or "))
			return
		}
	}
	if s.hasConst && !equal(v, s.constVal) {
		fail("must be %v", s.constVal)
	}
	if s.enum != nil {
		ok := false
		for _, e := range s.enum {
			if equal(v, e) {
				ok = true
			}
		}
		if !ok {
			fail("%v not in enum %v", v, s.enum)
		}
	}
	switch x := v.(type) {
	case json.Number:
		f, _, err := big.ParseFloat(string(x), 10, 200, big.ToNearestEven)
		if err != nil {
			fail("bad number %s", x)
			return
		}
		if s.minimum != nil && f.Cmp(s.minimum) < 0 {
			fail("%s below minimum %s", x, s.minimum.Text('g', 10))
		}
		if s.maximum != nil && f.Cmp(s.maximum) > 0 {
			fail("%s above maximum %s", x, s.maximum.Text('g', 10))
		}
	case string:
		if s.pattern != nil && !s.pattern.MatchString(x) {
			fail("%q does not match %s", x, s.pattern)
		}
	case []any:
		if s.items != nil {
			for i, it := range x {
				s.items.check(it, fmt.Sprintf("%s/%d", path, i), errs)
			}
		}
	case map[string]any:
		for _, r := range s.required {
			if _, ok := x[r]; !ok {
				fail("missing required property %q", r)
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, ok := s.properties[k]
			if !ok {
				if s.closed {
					fail("property %q not allowed", k)
				}
				continue
			}
			sub.check(x[k], path+"/"+k, errs)
		}
	}
}

func isIntegral(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	f, _, err := big.ParseFloat(string(n), 10, 200, big.ToNearestEven)
	return err == nil && f.IsInt()
}

// equal compares decoded JSON values (numbers by value).
func equal(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, _, e1 := big.ParseFloat(string(x), 10, 200, big.ToNearestEven)
		fy, _, e2 := big.ParseFloat(string(y), 10, 200, big.ToNearestEven)
		return e1 == nil && e2 == nil && fx.Cmp(fy) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			if yv, ok := y[k]; !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return a == b
}
