package protocol

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"os"
	"path/filepath"
)

// CurvesPath is where Run keeps the plot data of config c in cacheDir, so
// that the report can be written again from results.json without
// re-evaluating (didoedge eval --report-only).
func CurvesPath(cacheDir string, c *Config) string {
	return filepath.Join(cacheDir, "curves-"+hashOf(c)+".gob")
}

// SaveCurves writes cv to path (gob; the pooled sky scores of a full run
// are hundreds of megabytes, too many for JSON).
func SaveCurves(path string, cv *Curves) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save curves: %w", err)
	}
	w := bufio.NewWriter(f)
	if err := gob.NewEncoder(w).Encode(cv); err != nil {
		f.Close()
		return fmt.Errorf("save curves %q: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("save curves %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save curves %q: %w", path, err)
	}
	return nil
}

// LoadCurves reads the plot data SaveCurves wrote.
func LoadCurves(path string) (*Curves, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load curves (run the evaluation first): %w", err)
	}
	defer f.Close()
	var cv Curves
	if err := gob.NewDecoder(bufio.NewReader(f)).Decode(&cv); err != nil {
		return nil, fmt.Errorf("load curves %q: %w", path, err)
	}
	for m, s := range cv.SkyScores {
		if len(cv.SkyLabels[m]) != len(s) {
			return nil, fmt.Errorf("load curves %q: %s has %d sky scores and %d labels", path, m, len(s), len(cv.SkyLabels[m]))
		}
	}
	return &cv, nil
}
