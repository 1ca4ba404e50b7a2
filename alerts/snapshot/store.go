package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// ErrNotFound is returned by Get for an id without a snapshot.
var ErrNotFound = errors.New("snapshot not found")

// idPattern is what an event id looks like (<camera>-<zone>-<ms>-<n>);
// anything else is refused before it reaches the file system.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

// Store keeps snapshots as <dir>/<id>.jpg within a byte budget: after each
// Put the oldest files (by the order they were last written) are deleted
// until the total fits. It is safe for concurrent use, and one process at a
// time owns the directory.
type Store struct {
	dir      string
	maxBytes int64

	mu    sync.Mutex
	order []string         // ids, oldest write first
	sizes map[string]int64 // id -> bytes
	total int64
}

// OpenStore creates dir if needed, indexes the snapshots already there
// (oldest modification first) and trims them to maxBytes.
func OpenStore(dir string, maxBytes int64) (*Store, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("snapshot store %s: byte budget %d must be positive", dir, maxBytes)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	s := &Store{dir: dir, maxBytes: maxBytes, sizes: map[string]int64{}}
	type found struct {
		id   string
		info fs.FileInfo
	}
	var have []found
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".jpg")
		if !ok || !idPattern.MatchString(id) || !e.Type().IsRegular() {
			if strings.HasSuffix(e.Name(), ".tmp") {
				os.Remove(filepath.Join(dir, e.Name())) // a write cut short
			}
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		have = append(have, found{id, info})
	}
	slices.SortStableFunc(have, func(a, b found) int { return a.info.ModTime().Compare(b.info.ModTime()) })
	for _, f := range have {
		s.order = append(s.order, f.id)
		s.sizes[f.id] = f.info.Size()
		s.total += f.info.Size()
	}
	s.mu.Lock()
	err = s.trim("")
	s.mu.Unlock()
	return s, err
}

// Put stores the snapshot of an event id, replacing an earlier one of the
// same id, then deletes the oldest others until the store fits its budget.
// A single snapshot larger than the budget is refused.
func (s *Store) Put(id string, jpeg []byte) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("snapshot store: bad id %q", id)
	}
	if int64(len(jpeg)) > s.maxBytes {
		return fmt.Errorf("snapshot store: %s is %d bytes, above the budget of %d", id, len(jpeg), s.maxBytes)
	}
	path := filepath.Join(s.dir, id+".jpg")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, jpeg, 0o644); err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("snapshot store: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.sizes[id]; ok {
		s.total -= old
		s.order = slices.DeleteFunc(s.order, func(x string) bool { return x == id })
	}
	s.order = append(s.order, id)
	s.sizes[id] = int64(len(jpeg))
	s.total += int64(len(jpeg))
	return s.trim(id)
}

// trim deletes the oldest snapshots, never keep, until the total fits.
func (s *Store) trim(keep string) error {
	var errs []error
	for s.total > s.maxBytes && len(s.order) > 0 {
		id := s.order[0]
		if id == keep {
			break // cannot happen: keep is the newest and fits alone
		}
		s.order = s.order[1:]
		if err := os.Remove(filepath.Join(s.dir, id+".jpg")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		s.total -= s.sizes[id]
		delete(s.sizes, id)
	}
	return errors.Join(errs...)
}

// Get returns the snapshot of an event id.
func (s *Store) Get(id string) ([]byte, error) {
	if !idPattern.MatchString(id) {
		return nil, fmt.Errorf("%w: bad id %q", ErrNotFound, id)
	}
	s.mu.Lock()
	_, ok := s.sizes[id]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, id+".jpg"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return b, err
}

// Bytes is the total size of the stored snapshots.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Len is the number of stored snapshots.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.order)
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }
