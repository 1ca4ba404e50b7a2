package record

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Recording file names: rec-<UTC start>-<counter>[-clip].mcap, so that
// the lexical order is the order of creation.
const (
	filePrefix = "rec-"
	fileSuffix = ".mcap"
)

func slicesSort(s []string) { slices.Sort(s) }

// recording is a recording file in the directory.
type recording struct {
	path string
	size int64
}

// listRecordings returns the recordings of dir, oldest first.
func listRecordings(dir string) ([]recording, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []recording
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasPrefix(n, filePrefix) || !strings.HasSuffix(n, fileSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, recording{path: filepath.Join(dir, n), size: info.Size()})
	}
	slices.SortFunc(out, func(a, b recording) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// enforceBudget deletes the oldest recordings (never keep) until the
// others plus one full file (rotate_bytes) fit in budget_bytes. Called
// before each new file, it keeps the directory within the budget up to the
// overshoot of the last file past rotate_bytes (less than one chunk plus
// the summary): never more than one file over.
func (w *worker) enforceBudget(keep string) {
	recs, err := listRecordings(w.cfg.Dir)
	if err != nil {
		w.r.writeErrs.Add(1)
		w.r.log.Error("recording: list", "dir", w.cfg.Dir, "err", err)
		return
	}
	var total int64
	for _, r := range recs {
		total += r.size
	}
	for _, r := range recs {
		if total+w.cfg.RotateBytes <= w.cfg.BudgetBytes {
			return
		}
		if r.path == keep {
			continue
		}
		// With record.upload the finished files here are those the full
		// queue refused; the one being moved into the queue is skipped.
		if removed, err := w.r.ho.remove(r.path); err != nil {
			w.r.writeErrs.Add(1)
			w.r.log.Error("recording: delete", "file", r.path, "err", err)
			continue
		} else if !removed {
			continue
		}
		total -= r.size
		w.r.filesDeleted.Add(1)
		w.r.log.Info("recording deleted (budget)", "file", r.path, "bytes", r.size)
	}
}
