package upload

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/crc64nvme"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/pkg/durable"
)

// ErrBudget is returned by Enqueue when the file would take the queue
// above its byte budget; the file is left where it was.
var ErrBudget = errors.New("upload queue: byte budget reached")

// item is one queued file; its sidecar is the JSON of it.
type item struct {
	Seq  uint64 `json:"seq"`
	Key  string `json:"key"`
	Size int64  `json:"size"`
	// CRC64NVME is the file's CRC-64/NVME and PartCRC64NVME each part's
	// (one for a single PUT), base64 of the 8 big-endian bytes as S3
	// writes them: the requests carry them for the server to check, and
	// the object's stored full-object checksum must equal CRC64NVME.
	CRC64NVME     string            `json:"crc64nvme,omitempty"`
	PartCRC64NVME []string          `json:"part_crc64nvme,omitempty"`
	PartSize      int64             `json:"part_size"`
	Meta          map[string]string `json:"meta"`
	// UploadID is the multipart upload in progress ("" before it starts).
	UploadID string `json:"upload_id,omitempty"`
	// QueuedAt is when Enqueue took the file (zero in sidecars written
	// before it existed: the data file's modification time stands in).
	QueuedAt time.Time `json:"queued_at"`

	// SHA256 and PartMD5 are what sidecars written before the CRC64NVME
	// ones held (the file's SHA-256, each part's MD5). Such an item is
	// upgraded before its upload (see Queue.upgrade): the file is checked
	// against them once, then carries CRCs like any other.
	SHA256  string   `json:"sha256,omitempty"`
	PartMD5 []string `json:"part_md5,omitempty"`
}

func (it *item) multipart() bool { return len(it.PartCRC64NVME) > 1 }

// legacy reports a sidecar of the MD5/SHA-256 format.
func (it *item) legacy() bool { return len(it.PartCRC64NVME) == 0 }

// Stats are the queue's counters; Queued and QueuedBytes are its present
// content, the rest count since Open.
type Stats struct {
	Queued, QueuedBytes     int64
	Uploaded, UploadedBytes int64
	Refused                 int64 // Enqueue over the budget
	Failures                int64 // failed attempts (retried)
	ResumedParts            int64 // parts found on the server after a restart, not sent again
	AlreadyThere            int64 // items whose object was complete and verified before sending
	// Oldest is when the oldest queued item was queued (zero when the
	// queue is empty): how far behind the uploads are.
	Oldest time.Time
}

// Queue is a durable upload queue in a directory.
type Queue struct {
	cfg    Config
	loc    objstore.Location
	client *objstore.Client
	log    *slog.Logger

	mu    sync.Mutex
	seq   uint64
	bytes int64
	count int64
	since map[uint64]time.Time // queued item -> when it was queued
	wake  chan struct{}
	freed chan struct{}

	uploaded, uploadedBytes, refused, failures, resumed, already atomic.Int64
}

const (
	dataExt    = ".data"
	sidecarExt = ".json"
)

// Open opens (or creates) the queue in cfg.Dir and recovers it after a
// crash: a sidecar without its data file is an enqueue that never
// finished (its file is still where it was) or an upload whose local
// delete was cut short; either way it is removed. client may be nil for a
// process that only enqueues.
func Open(cfg Config, client *objstore.Client, log *slog.Logger) (*Queue, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate("upload"); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	loc, _ := objstore.ParseURL(cfg.Target)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("upload queue %s: %w", cfg.Dir, err)
	}
	q := &Queue{cfg: cfg, loc: loc, client: client, log: log, wake: make(chan struct{}, 1), freed: make(chan struct{}, 1),
		since: map[uint64]time.Time{}}
	items, err := q.scan()
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		q.bytes += it.Size
		q.count++
		q.seq = max(q.seq, it.Seq)
		t := it.QueuedAt
		if t.IsZero() {
			if st, err := os.Stat(q.dataPath(it.Seq)); err == nil {
				t = st.ModTime()
			}
		}
		q.since[it.Seq] = t
	}
	return q, nil
}

func (q *Queue) dataPath(seq uint64) string {
	return filepath.Join(q.cfg.Dir, fmt.Sprintf("%020d%s", seq, dataExt))
}
func (q *Queue) sidecarPath(seq uint64) string {
	return filepath.Join(q.cfg.Dir, fmt.Sprintf("%020d%s", seq, sidecarExt))
}

// scan reads the queue's items in order, removing temporary files and
// sidecars without data.
func (q *Queue) scan() ([]*item, error) {
	ents, err := os.ReadDir(q.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("upload queue %s: %w", q.cfg.Dir, err)
	}
	var items []*item
	for _, e := range ents {
		name := e.Name()
		full := filepath.Join(q.cfg.Dir, name)
		switch {
		case strings.HasPrefix(name, ".tmp-"):
			os.Remove(full)
		case strings.HasSuffix(name, sidecarExt):
			it, err := readSidecar(full)
			if err != nil {
				return nil, err
			}
			if _, err := os.Stat(q.dataPath(it.Seq)); errors.Is(err, os.ErrNotExist) {
				os.Remove(full)
				continue
			}
			items = append(items, it)
		}
	}
	slices.SortFunc(items, func(a, b *item) int { return int(a.Seq - b.Seq) })
	return items, nil
}

func readSidecar(path string) (*item, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("upload queue: %w", err)
	}
	var it item
	if err := json.Unmarshal(b, &it); err != nil {
		return nil, fmt.Errorf("upload queue: sidecar %s: %w", path, err)
	}
	switch {
	case it.Key == "" || it.Size < 0 || it.PartSize <= 0:
		return nil, fmt.Errorf("upload queue: sidecar %s: incomplete", path)
	case len(it.PartCRC64NVME) > 0 && it.CRC64NVME == "":
		return nil, fmt.Errorf("upload queue: sidecar %s: part checksums without the file's crc64nvme", path)
	case len(it.PartCRC64NVME) == 0 && (len(it.PartMD5) == 0 || it.SHA256 == ""):
		return nil, fmt.Errorf("upload queue: sidecar %s: neither crc64nvme checksums nor the older sha256 and part MD5s", path)
	}
	return &it, nil
}

// writeSidecar replaces it's sidecar atomically and durably (temporary
// file, fsync, rename, fsync of the directory).
func (q *Queue) writeSidecar(it *item) error {
	b, err := json.Marshal(it)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(q.cfg.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("upload queue: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), q.sidecarPath(it.Seq))
	}
	if err == nil {
		err = durable.SyncDir(q.cfg.Dir)
	}
	if err != nil {
		return fmt.Errorf("upload queue: sidecar of %s: %w", it.Key, err)
	}
	return nil
}

// Enqueue moves the finished file src into the queue, to be uploaded as
// prefix/<vehicle>/<camera>/<base name of src> with meta as the object's
// metadata (meta["vehicle"] and meta["camera"] name the key's levels;
// model and calibration identities go in too). Over the byte budget it
// returns ErrBudget and leaves src in place.
func (q *Queue) Enqueue(src string, meta map[string]string) error {
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("upload queue: %w", err)
	}
	for _, k := range []string{"vehicle", "camera"} {
		if v := meta[k]; v == "" || strings.ContainsAny(v, "/\\") || v == "." || v == ".." {
			return fmt.Errorf("upload queue: %s: metadata %q is %q (want a plain name: it is a key level)", src, k, v)
		}
	}
	q.mu.Lock()
	if q.bytes+st.Size() > q.cfg.MaxBytes {
		q.mu.Unlock()
		q.refused.Add(1)
		return fmt.Errorf("%w: %s (%d bytes) on %d of %d", ErrBudget, src, st.Size(), q.bytes, q.cfg.MaxBytes)
	}
	q.seq++
	seq := q.seq
	q.bytes += st.Size()
	q.count++
	now := time.Now()
	q.since[seq] = now
	q.mu.Unlock()
	undo := func() {
		q.mu.Lock()
		q.bytes -= st.Size()
		q.count--
		delete(q.since, seq)
		q.mu.Unlock()
	}
	it := &item{Seq: seq, Size: st.Size(), PartSize: q.cfg.PartSize, Meta: meta, QueuedAt: now.UTC(),
		Key: strings.TrimPrefix(path.Join(q.loc.Key, meta["vehicle"], meta["camera"], filepath.Base(src)), "/")}
	if err := hashFile(src, it); err != nil {
		undo()
		return err
	}
	// The sidecar first, then the data: a crash between the two leaves a
	// sidecar without data, which Open removes, and src where it was.
	if err := q.writeSidecar(it); err != nil {
		undo()
		return err
	}
	if err := os.Rename(src, q.dataPath(seq)); err != nil {
		os.Remove(q.sidecarPath(seq))
		undo()
		return fmt.Errorf("upload queue: move %s in (same filesystem as %s?): %w", src, q.cfg.Dir, err)
	}
	if err := durable.SyncDir(q.cfg.Dir); err != nil {
		return fmt.Errorf("upload queue: %w", err)
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// hashFile fills it's CRC64NVME and PartCRC64NVME in one read of the
// file. CRC-64/NVME runs on the CPU's carry-less multiply instructions
// (about 0.02 ms per MB on the test VM, against 1.3 for MD5 and 0.6 for
// SHA-256), and S3 servers check it on receipt.
func hashFile(path string, it *item) error {
	err := hashParts(path, it.PartSize, nil, nil, func(whole, part []byte, _ hash.Hash) {
		it.PartCRC64NVME = append(it.PartCRC64NVME, encodeCRC(part))
		it.CRC64NVME = encodeCRC(whole)
	})
	if err != nil {
		return err
	}
	if len(it.PartCRC64NVME) > MaxParts {
		return fmt.Errorf("upload queue: %s needs %d parts of %d bytes, more than S3's %d", path, len(it.PartCRC64NVME), it.PartSize, MaxParts)
	}
	return nil
}

// hashParts reads path once, in parts of partSize bytes (at least one
// part: an empty file has one empty part), through CRC-64/NVME, and also
// through w and a hash per part from newPart when they are not nil. After
// each part, done gets the big-endian CRC-64/NVME of the file so far and
// of the part, and the part's own hash.
func hashParts(path string, partSize int64, w io.Writer, newPart func() hash.Hash, done func(whole, part []byte, ph hash.Hash)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("upload queue: %w", err)
	}
	defer f.Close()
	whole := crc64nvme.New()
	buf := make([]byte, min(partSize, 1<<20))
	for first := true; ; first = false {
		part := crc64nvme.New()
		var ph hash.Hash
		if newPart != nil {
			ph = newPart()
		}
		var n int64
		var rerr error
		for n < partSize && rerr == nil {
			var k int
			k, rerr = io.ReadFull(f, buf[:min(int64(len(buf)), partSize-n)])
			whole.Write(buf[:k])
			part.Write(buf[:k])
			if w != nil {
				w.Write(buf[:k])
			}
			if ph != nil {
				ph.Write(buf[:k])
			}
			n += int64(k)
		}
		if n > 0 || first {
			done(whole.Sum(nil), part.Sum(nil), ph)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("upload queue: read %s: %w", path, rerr)
		}
	}
}

func encodeCRC(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Fits reports whether a file of size bytes would be taken now (Enqueue
// may still refuse it if another enqueue comes first; uploads only free
// room). A caller that retries a refused file asks this first, so that
// Stats.Refused counts refusals, not retries.
func (q *Queue) Fits(size int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes+size <= q.cfg.MaxBytes
}

// Freed receives (coalesced) after an upload frees room in the queue: a
// caller holding files the queue refused offers them again then.
func (q *Queue) Freed() <-chan struct{} { return q.freed }

// Config is the queue's configuration, defaults filled.
func (q *Queue) Config() Config { return q.cfg }

// Stats returns the counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	s := Stats{Queued: q.count, QueuedBytes: q.bytes}
	for _, t := range q.since {
		if s.Oldest.IsZero() || t.Before(s.Oldest) {
			s.Oldest = t
		}
	}
	q.mu.Unlock()
	s.Uploaded, s.UploadedBytes = q.uploaded.Load(), q.uploadedBytes.Load()
	s.Refused, s.Failures = q.refused.Load(), q.failures.Load()
	s.ResumedParts, s.AlreadyThere = q.resumed.Load(), q.already.Load()
	return s
}
