package manifest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Entry is one block of models/MANIFEST: a file and what made it.
// Blocks are "key: value" lines separated by blank lines; '#' starts a
// comment line. Every block needs file and sha256 (64 hex digits) and
// command; other keys (seed, data, wall, figures, ...) are kept in order.
type Entry struct {
	File, SHA256, Command string
	Fields                [][2]string // every key/value of the block, in file order
}

// Parse reads a manifest; name labels errors.
func Parse(r io.Reader, name string) ([]Entry, error) {
	var out []Entry
	var cur *Entry
	seen := map[string]bool{}
	finish := func(line int) error {
		if cur == nil {
			return nil
		}
		switch {
		case cur.File == "":
			return fmt.Errorf("manifest %q: block ending at line %d has no file", name, line)
		case len(cur.SHA256) != 64 || strings.Trim(strings.ToLower(cur.SHA256), "0123456789abcdef") != "":
			return fmt.Errorf("manifest %q: %s: sha256 %q is not 64 hex digits", name, cur.File, cur.SHA256)
		case cur.Command == "":
			return fmt.Errorf("manifest %q: %s: no command", name, cur.File)
		case seen[cur.File]:
			return fmt.Errorf("manifest %q: %s listed twice", name, cur.File)
		}
		seen[cur.File] = true
		out = append(out, *cur)
		cur = nil
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if line == "" {
			if err := finish(n); err != nil {
				return nil, err
			}
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || key == "" {
			return nil, fmt.Errorf("manifest %q line %d: want \"key: value\", got %q", name, n, line)
		}
		if cur == nil {
			cur = &Entry{}
		}
		switch key {
		case "file":
			if cur.File != "" {
				return nil, fmt.Errorf("manifest %q line %d: second file in one block (separate blocks by a blank line)", name, n)
			}
			if val == "" || strings.ContainsAny(val, `/\`) || val == "." || val == ".." {
				return nil, fmt.Errorf("manifest %q line %d: file %q must be a plain file name", name, n, val)
			}
			cur.File = val
		case "sha256":
			cur.SHA256 = strings.ToLower(val)
		case "command":
			cur.Command = val
		}
		cur.Fields = append(cur.Fields, [2]string{key, val})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("manifest %q: %w", name, err)
	}
	if err := finish(n + 1); err != nil {
		return nil, err
	}
	return out, nil
}

// Verify checks DIR/MANIFEST against the files in DIR: every listed
// file exists with its sha256, and every other regular file in DIR is listed.
func Verify(dir string) ([]Entry, error) {
	path := filepath.Join(dir, "MANIFEST")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := Parse(f, path)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{"MANIFEST": true}
	for _, e := range entries {
		listed[e.File] = true
		sum, err := FileSHA256(filepath.Join(dir, e.File))
		if err != nil {
			return nil, fmt.Errorf("manifest %q: %w", path, err)
		}
		if sum != e.SHA256 {
			return nil, fmt.Errorf("manifest %q: %s has sha256 %s, the manifest says %s (retrain with its command, or update the manifest)", path, e.File, sum, e.SHA256)
		}
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, de := range des {
		if de.Type().IsRegular() && !listed[de.Name()] {
			return nil, fmt.Errorf("manifest %q: %s is in %s but not listed", path, de.Name(), dir)
		}
	}
	return entries, nil
}

// FileSHA256 is the hex sha256 of a file's contents.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %q: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
