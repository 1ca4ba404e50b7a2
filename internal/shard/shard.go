package shard

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Environment of a Kubernetes Indexed Job's pod: Kubernetes sets the
// index; the manifest sets the count (cross/deploy/calibrate), which Kubernetes
// does not expose to the pod.
const (
	EnvIndex = "JOB_COMPLETION_INDEX"
	EnvCount = "DIDOEDGE_SHARD_COUNT"
)

// IndexPlaceholder in a summary path is replaced by the shard index, so
// that every pod of an Indexed Job can be given the same --out.
const IndexPlaceholder = "{index}"

// Path expands IndexPlaceholder in path.
func Path(path string, index int) string {
	return strings.ReplaceAll(path, IndexPlaceholder, strconv.Itoa(index))
}

// FromEnv fills an unset index (< 0) and count (0) from EnvIndex and
// EnvCount, else shard 0 of 1.
func FromEnv(index, count *int) error {
	if *index < 0 {
		*index = 0
		if v, ok, err := envInt(EnvIndex); err != nil {
			return err
		} else if ok {
			*index = v
		}
	}
	if *count == 0 {
		*count = 1
		if v, ok, err := envInt(EnvCount); err != nil {
			return err
		} else if ok {
			*count = v
		}
	}
	return nil
}

// envInt reads an integer environment variable; ok is false when unset.
func envInt(name string) (v int, ok bool, err error) {
	s := os.Getenv(name)
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, false, fmt.Errorf("environment %s=%q: not an integer", name, s)
	}
	return v, true, nil
}

// WriteFile writes path through a temporary file in the same directory
// and a rename, so that a reader sees the whole file or none of it.
func WriteFile(path string, write func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".shard-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// List returns the summary files that paths name: a file as given, a
// directory as its *.json files in sorted order.
func List(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		m, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("directory %s has no *.json", p)
		}
		slices.Sort(m)
		files = append(files, m...)
	}
	return files, nil
}
