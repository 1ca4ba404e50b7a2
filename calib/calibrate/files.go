package calibrate

import (
	"fmt"
	"os"

	"github.com/didoedge/didoedge/internal/shard"
)

// IndexPlaceholder in a summary path is replaced by the shard index
// (internal/shard).
const IndexPlaceholder = shard.IndexPlaceholder

// SummaryPath expands IndexPlaceholder in path.
func SummaryPath(path string, index int) string { return shard.Path(path, index) }

// WriteSummaryFile writes s to path atomically (a temporary file in the
// same directory, then a rename), so that a merge never reads half a
// summary.
func WriteSummaryFile(path string, s *Summary) error {
	if err := shard.WriteFile(path, s.Write); err != nil {
		return fmt.Errorf("calibration summary: %w", err)
	}
	return nil
}

// ReadSummaryFiles reads summaries; a directory stands for its *.json
// files, sorted.
func ReadSummaryFiles(paths []string) ([]Named, error) {
	files, err := shard.List(paths)
	if err != nil {
		return nil, fmt.Errorf("calibration summary: %w", err)
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
