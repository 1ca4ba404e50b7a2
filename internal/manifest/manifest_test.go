package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelsManifest checks every sha256 in models/MANIFEST against the
// committed files: a changed, missing or unlisted file fails.
func TestModelsManifest(t *testing.T) {
	entries, err := Verify(filepath.Join("..", "..", "models"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"depth.onnx": false, "depth.yaml": false, "auxue.onnx": false, "auxue.yaml": false}
	for _, e := range entries {
		want[e.File] = true
		if !strings.HasPrefix(e.Command, "didoedge ") {
			t.Errorf("%s: command %q does not run didoedge", e.File, e.Command)
		}
	}
	for f, ok := range want {
		if !ok {
			t.Errorf("models/MANIFEST does not list %s", f)
		}
	}
}

func TestVerifyDetectsChanges(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.bin", "hello")
	// sha256("hello")
	const sum = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	write("MANIFEST", "# c\nfile: a.bin\nsha256: "+sum+"\ncommand: didoedge x\nseed: 1\n")
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	write("a.bin", "hellO")
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "a.bin") {
		t.Fatalf("changed file: %v", err)
	}
	write("a.bin", "hello")
	write("b.bin", "x")
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "b.bin") {
		t.Fatalf("unlisted file: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	good := "file: a\nsha256: " + strings.Repeat("ab", 32) + "\ncommand: didoedge x\n"
	for _, tc := range []struct{ name, text string }{
		{"no colon", "file a\n"},
		{"short sum", "file: a\nsha256: abc\ncommand: x\n"},
		{"no command", "file: a\nsha256: " + strings.Repeat("ab", 32) + "\n"},
		{"no file", "sha256: " + strings.Repeat("ab", 32) + "\ncommand: x\n"},
		{"path", strings.Replace(good, "file: a", "file: ../a", 1)},
		{"twice", good + "\n" + good},
		{"two files", good + "file: b\n"},
	} {
		if _, err := Parse(strings.NewReader(tc.text), "M"); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	es, err := Parse(strings.NewReader("# x\n\n"+good+"\n\n"), "M")
	if err != nil || len(es) != 1 || es[0].File != "a" || len(es[0].Fields) != 3 {
		t.Fatalf("good manifest: %+v %v", es, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("file: a\nsha256: " + strings.Repeat("0", 64) + "\ncommand: didoedge train\n\nfile: b\nsha256: " + strings.Repeat("f", 64) + "\ncommand: c\n")
	f.Add("# only a comment\n")
	f.Add("file: \x00\n:\n")
	f.Fuzz(func(t *testing.T, text string) {
		es, err := Parse(strings.NewReader(text), "fuzz")
		if err != nil {
			return
		}
		for _, e := range es {
			if e.File == "" || len(e.SHA256) != 64 || e.Command == "" {
				t.Fatalf("accepted incomplete entry %+v", e)
			}
		}
	})
}
