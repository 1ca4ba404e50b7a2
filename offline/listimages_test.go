package offline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListImagesFollowsLinks: `model run --images DIR` takes a symbolic
// link to a picture like the picture itself, and skips links to
// directories, dangling links and other files.
func TestListImagesFollowsLinks(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(dir, "a.png"), filepath.Join(other, "b.jpg")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{
		{filepath.Join(other, "b.jpg"), "b.jpg"},
		{other, "c.png"},
		{filepath.Join(other, "gone.png"), "d.png"},
	} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "e.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ListImages(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, filepath.Base(p))
	}
	if strings.Join(names, " ") != "a.png b.jpg" {
		t.Fatalf("ListImages = %v, want a.png and the linked b.jpg", names)
	}
}
