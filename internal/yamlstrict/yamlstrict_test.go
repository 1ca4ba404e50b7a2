package yamlstrict

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/capped"
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
		{"anchor and alias", "items:\n  - &a {name: a, count: 2}\n  - *a\n", ""},
		{"merge key into a struct", "base: &b {count: 3}\nitems:\n  - <<: *b\n    name: a\n", "base: unknown key"},
		{"merge key in a list item", "items:\n  - &b {count: 3}\n  - <<: *b\n    name: a\n", ""},
		{"merge of a sequence", "items:\n  - &b {count: 3}\n  - &c {name: c}\n  - <<: [*b, *c]\n", ""},
		{"unknown key behind a merge", "items:\n  - &b {cnt: 3}\n", "items[0].cnt: unknown key (line 2)"},
		{"unknown key merged in", "tags:\n  x: &b {count: 1}\nitems:\n  - <<: {nmae: 3}\n", "items[0].nmae: unknown key (line 4)"},
		{"unknown key in an aliased node", "tags:\n  x: &b {cnt: 1}\n  y: *b\n", "tags.x.cnt: unknown key (line 2)"},
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

type withRest struct {
	Rate float64          `yaml:"rate"`
	Rest map[string]inner `yaml:",inline"`
}

// An inline map takes every other key, checked against its value type.
func TestDecodeInlineMap(t *testing.T) {
	var w withRest
	if err := Decode([]byte("rate: 1\nx: {name: a}\n"), &w); err != nil || w.Rest["x"].Name != "a" {
		t.Fatalf("decoded %+v, %v", w, err)
	}
	if err := Decode([]byte("rate: 1\nx: {nme: a}\n"), &w); err == nil || !strings.Contains(err.Error(), "x.nme: unknown key (line 2)") {
		t.Fatalf("unknown key inside an inline map's value: %v", err)
	}
}

// The merged values arrive in the struct.
func TestDecodeMerge(t *testing.T) {
	var o outer
	doc := "items:\n  - &b {name: a, count: 3}\n  - <<: *b\n    name: b\n"
	if err := Decode([]byte(doc), &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Items) != 2 || o.Items[1].Name != "b" || o.Items[1].Count != 3 {
		t.Fatalf("decoded %+v, want items[1] {b 3}", o.Items)
	}
}

// secretLine is a file's first line that must never come back in an
// error of DecodeRedacted (the shape of /etc/shadow's first line, which
// YAML reads as a key: its trailing colon).
const secretLine = "root:$y$j9T$Zq8sEcReT0kEn$abc:19700:0:99999:7:::"

func TestDecodeRedacted(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"a shadow-like file is an unknown key", secretLine + "\ndaemon:*:19700:0:99999:7:::\n", "line 1: unknown key"},
		{"a token file is a scalar", "s3cr3t-t0ken-0123456789abcdef\n", "line 1: cannot unmarshal !!str into yamlstrict.outer"},
		{"unknown nested key names its parent", "items:\n  - hunter2: x\n", "items[0]: unknown key (line 2)"},
		{"wrong type gives the types", "rate: hunter2hunter2\n", "rate: cannot unmarshal !!str into float64 (line 1)"},
		{"a map's keys are *", "tags:\n  hunter2: {count: hunter3}\n", "tags.*.count: cannot unmarshal !!str into int (line 2)"},
		{"a custom tag is not quoted", "rate: !hunter2 1\n", "rate: cannot unmarshal a tagged value into float64 (line 1)"},
		{"duplicate key", "rate: 1\nrate: 2\n", "rate: a key given twice (first at line 1) (line 2)"},
		{"syntax error", "items: [hunter2\n", "not valid YAML"},
		{"unknown anchor", "rate: *hunter2\n", "not valid YAML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o outer
			err := DecodeRedacted([]byte(tc.doc), &o)
			if err == nil {
				t.Fatalf("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
			for _, secret := range []string{"hunter", "s3cr3t", "root", "$y$", "daemon"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q quotes the document (%q)", err, secret)
				}
			}
		})
	}
	var o outer
	if err := DecodeRedacted([]byte("items:\n  - name: a\n"), &o); err != nil || o.Items[0].Name != "a" {
		t.Fatalf("DecodeRedacted of a valid document: %+v, %v", o, err)
	}
}

func TestRedact(t *testing.T) {
	var into struct {
		Rate float64 `yaml:"rate"`
	}
	cases := []struct {
		doc, want string
	}{
		{"rate: hunter2\n", "line 1: cannot unmarshal !!str into float64"},
		{"hunter2\n", "line 1: cannot unmarshal !!str into struct { Rate float64 \"yaml:\\\"rate\\\"\" }"},
		{"rate: [hunter2\n", "line 1: not valid YAML"},
	}
	for _, tc := range cases {
		err := Redact(yaml.Unmarshal([]byte(tc.doc), &into))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Redact of %q: %v, want %q", tc.doc, err, tc.want)
		}
	}
	if Redact(nil) != nil {
		t.Error("Redact(nil) is not nil")
	}
}

// aliasBomb is the billion laughs in YAML: 9 levels of 9 aliases, 4 KB
// that expand to 9^9 scalars.
func aliasBomb(field string) string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := 0; j < 9; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	fmt.Fprintf(&b, "%s: *a8\n", field)
	return b.String()
}

// bombStrict takes the bomb's 9 levels under items: a walk that follows
// every alias descends 9^9 times.
type bombStrict struct {
	Items [][][][][][][][][]string `yaml:"items"`
	A0    any                      `yaml:"a0"`
	A1    any                      `yaml:"a1"`
	A2    any                      `yaml:"a2"`
	A3    any                      `yaml:"a3"`
	A4    any                      `yaml:"a4"`
	A5    any                      `yaml:"a5"`
	A6    any                      `yaml:"a6"`
	A7    any                      `yaml:"a7"`
	A8    any                      `yaml:"a8"`
}

// The alias bomb is refused quickly and in bounded memory, by the strict
// walk (each aliased node once) and yaml.v3's aliasing guard. Run in a
// child under ulimit -v: a regression exhausts the child, not the machine.
func TestAliasBomb(t *testing.T) {
	if !capped.Child(t, capped.Default()) {
		return
	}
	doc := aliasBomb("items")
	if len(doc) > 4096 {
		t.Fatalf("bomb of %d bytes", len(doc))
	}
	for name, decode := range map[string]func([]byte, any) error{"Decode": Decode, "DecodeRedacted": DecodeRedacted} {
		var into bombStrict
		err := decode([]byte(doc), &into)
		if err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
			t.Fatalf("%s of the alias bomb: %v, want yaml's excessive aliasing", name, err)
		}
		// The same bomb under a key the schema does not know is refused
		// by the walk before anything expands.
		var o outer
		if err := decode([]byte(aliasBomb("items")), &o); err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Fatalf("%s of the bomb into outer: %v, want unknown key a0", name, err)
		}
	}
}

// allowedWord is every word DecodeRedacted's messages may hold: its own
// phrases, yaml's tags, and the names of the schema (keys and Go types).
var allowedWord = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`line not valid YAML unknown key cannot unmarshal into a tagged value given twice first at
		invalid empty document contains excessive aliasing yaml too large over nodes str int float bool null seq map
		timestamp binary items tags rate name count raw yamlstrict outer inner string float64 Node`) {
		allowedWord[w] = true
	}
}

var word = regexp.MustCompile(`[A-Za-z_]+`)

// FuzzDecode feeds the strict decoder documents with anchors, aliases and
// merge keys: it must not panic, must not expand an alias bomb (the fuzz
// engine finds them; each input must finish), and DecodeRedacted's
// errors must hold only the schema's words, never the document's.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		"items:\n  - name: a\n", "tags: {x: {count: [1]}}\n", "&a x: *a\n",
		"items:\n  - &b {name: a, count: 3}\n  - <<: *b\n    name: b\n",
		"items:\n  - &b {count: 3}\n  - &c {name: c}\n  - <<: [*b, *c]\n",
		"tags:\n  x: &b {count: 1}\n  y: *b\n  z: {<<: *b}\n",
		"a: &a [x, x]\nb: &b [*a, *a]\nitems: [*b, *b]\n",
		"<<: {rate: 1}\n", "rate: !custom zzz\n", "rate: 1\nrate: 2\n",
		secretLine + "\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var o outer
		_ = Decode([]byte(doc), &o) // must not panic
		var r outer
		err := DecodeRedacted([]byte(doc), &r)
		if err == nil {
			return
		}
		for _, w := range word.FindAllString(err.Error(), -1) {
			if !allowedWord[w] {
				t.Fatalf("redacted error %q holds %q, not a word of the schema", err, w)
			}
		}
	})
}
