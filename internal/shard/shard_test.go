package shard

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		index, count         int
		envIndex, envCount   string
		wantIndex, wantCount int
		errHas               string
	}{
		{name: "nothing: 0 of 1", index: -1, wantIndex: 0, wantCount: 1},
		{name: "environment", index: -1, envIndex: "2", envCount: "3", wantIndex: 2, wantCount: 3},
		{name: "flags win", index: 1, count: 4, envIndex: "2", envCount: "3", wantIndex: 1, wantCount: 4},
		{name: "bad index", index: -1, envIndex: "two", errHas: EnvIndex},
		{name: "bad count", index: 0, envCount: "x", errHas: EnvCount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvIndex, tc.envIndex)
			t.Setenv(EnvCount, tc.envCount)
			i, c := tc.index, tc.count
			err := FromEnv(&i, &c)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err %v, want one naming %s", err, tc.errHas)
				}
				return
			}
			if err != nil || i != tc.wantIndex || c != tc.wantCount {
				t.Fatalf("FromEnv = %d of %d, %v; want %d of %d", i, c, err, tc.wantIndex, tc.wantCount)
			}
		})
	}
	if got := Path("out/s-{index}.json", 7); got != "out/s-7.json" {
		t.Fatalf("Path = %q", got)
	}
}

// TestWriteFileAndList: a failed write leaves no file (and no temporary
// one); a directory lists its *.json files sorted, files pass as given.
func TestWriteFileAndList(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "b.json"), func(w io.Writer) error { _, err := io.WriteString(w, "{}"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "a.json"), func(w io.Writer) error { _, err := io.WriteString(w, "{}"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := WriteFile(filepath.Join(dir, "c.json"), func(w io.Writer) error { io.WriteString(w, "{"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("directory holds %d entries after a failed write, want 2", len(entries))
	}
	got, err := List([]string{dir, filepath.Join(dir, "b.json")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "b.json")}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if _, err := List([]string{t.TempDir()}); err == nil {
		t.Fatal("an empty directory was accepted")
	}
}
