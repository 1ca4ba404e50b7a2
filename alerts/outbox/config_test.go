package outbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckDir: the outbox directory may be missing (the outbox makes it)
// but its parent must be a directory; the error names the key given.
func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, want string
	}{
		{filepath.Join(dir, "outbox"), ""},
		{filepath.Join(dir, "missing", "outbox"), `alerts.outbox.dir: parent "` + filepath.Join(dir, "missing") + `" is not a directory`},
		{filepath.Join(file, "outbox"), `alerts.outbox.dir: parent "` + file + `" is not a directory`},
	} {
		err := Config{Dir: tc.dir}.CheckDir("alerts.outbox.dir")
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("dir %q: %v, want %q", tc.dir, err, tc.want)
		}
	}
}
