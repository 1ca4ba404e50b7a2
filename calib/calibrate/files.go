package calibrate

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// IndexPlaceholder in a summary path is replaced by the shard index, so
// that every pod of an Indexed Job can be given the same --out.
const IndexPlaceholder = "{index}"

// SummaryPath expands IndexPlaceholder in path.
func SummaryPath(path string, index int) string {
	return strings.ReplaceAll(path, IndexPlaceholder, strconv.Itoa(index))
}

// WriteSummaryFile writes s to path atomically (a temporary file in the
// same directory, then a rename), so that a merge never reads half a
// summary.
func WriteSummaryFile(path string, s *Summary) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".summary-*")
	if err != nil {
		return fmt.Errorf("calibration summary %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := s.Write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("calibration summary %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("calibration summary %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("calibration summary %s: %w", path, err)
	}
	return nil
}

// ReadSummaryFiles reads summaries; a directory stands for its *.json
// files, sorted.
func ReadSummaryFiles(paths []string) ([]Named, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("calibration summary: %w", err)
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
			return nil, fmt.Errorf("calibration summary: directory %s has no *.json", p)
		}
		slices.Sort(m)
		files = append(files, m...)
	}
	var out []Named
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			return nil, fmt.Errorf("calibration summary: %w", err)
		}
		s, err := ReadSummary(r, f)
		r.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, Named{Name: f, Summary: s})
	}
	return out, nil
}
