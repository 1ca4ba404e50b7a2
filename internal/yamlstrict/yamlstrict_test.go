package yamlstrict

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type inner struct {
	Name  string    `yaml:"name"`
	Count int       `yaml:"count"`
	Raw   yaml.Node `yaml:"raw"`
}

type outer struct {
	Items []inner          `yaml:"items"`
	Tags  map[string]inner `yaml:"tags"`
	Rate  float64          `yaml:"rate"`
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name, doc, wantErr string
	}{
		{"valid", "items:\n  - name: a\n    count: 2\nrate: 0.5\n", ""},
		{"raw node is not checked", "items:\n  - raw: {anything: [1, 2]}\n", ""},
		{"unknown top key", "rate: 1\nrte: 2\n", "rte: unknown key (line 2)"},
		{"unknown nested key", "items:\n  - name: a\n  - nmae: b\n", "items[1].nmae: unknown key (line 3)"},
		{"unknown key in map value", "tags:\n  x: {cnt: 1}\n", "tags.x.cnt: unknown key (line 2)"},
		{"type error names the key", "items:\n  - name: a\n    count: many\n", "items[0].count: cannot unmarshal"},
		{"type error on a flow line names the value's key", "items: [{name: a, count: lots}]\n", "items[0].count: cannot unmarshal"},
		{"empty document", "", "empty document"},
		{"syntax error", "items: [\n", "yaml:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o outer
			err := Decode([]byte(tc.doc), &o)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
	var o outer
	if err := Decode([]byte("items:\n  - name: a\n    count: 2\n"), &o); err != nil || o.Items[0].Count != 2 {
		t.Fatalf("decoded %+v, %v", o, err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("items:\n  - name: a\n")
	f.Add("tags: {x: {count: [1]}}\n")
	f.Add("&a x: *a\n")
	f.Fuzz(func(t *testing.T, doc string) {
		var o outer
		_ = Decode([]byte(doc), &o) // must not panic
	})
}
