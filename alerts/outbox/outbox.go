package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrFull is returned by Append when the record does not fit even after
// dropping every droppable record.
var ErrFull = errors.New("outbox full")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("outbox closed")

// Options configure an Outbox.
type Options struct {
	Dir string
	// MaxBytes bounds the encoded size of pending records.
	MaxBytes int64
	// MaxRecords bounds the number of pending records.
	MaxRecords int
	// SegmentBytes is the size at which a new segment file is started.
	SegmentBytes int64
	Logger       *slog.Logger
}

// Stats are the outbox counters since Open.
type Stats struct {
	Pending        int
	PendingBytes   int64
	DiskBytes      int64
	LastSeq        uint64
	AckedSeq       uint64
	Appended       uint64
	Acked          uint64
	DroppedUpdates uint64
	Refused        uint64
	TornRecords    uint64
}

type segment struct {
	num    uint64
	path   string
	size   int64
	maxSeq uint64
}

// Outbox is a durable ordered queue. It is safe for concurrent use.
type Outbox struct {
	opts Options
	log  *slog.Logger
	lock *os.File

	mu       sync.Mutex
	closed   bool
	segs     []segment
	active   *os.File
	pending  []Record // ordered by Seq
	pendSize int64
	lastSeq  uint64
	acked    uint64
	ready    chan struct{}
	buf      []byte
	st       Stats
}

const (
	segPrefix, segSuffix = "seg-", ".log"
	ackFile              = "acked"
	lockFile             = "lock"
)

// Open opens or creates the outbox in opts.Dir and replays its log.
// Only one process may hold an outbox directory open at a time.
func Open(opts Options) (*Outbox, error) {
	if opts.Dir == "" {
		return nil, errors.New("open outbox: no directory")
	}
	if opts.MaxBytes <= 0 || opts.MaxRecords <= 0 || opts.SegmentBytes <= 0 {
		return nil, fmt.Errorf("open outbox %q: limits must be positive", opts.Dir)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(opts.Dir, lockFile), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open outbox: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open outbox %q: locked by another process: %w", opts.Dir, err)
	}
	o := &Outbox{opts: opts, log: opts.Logger.With("outbox", opts.Dir), lock: lock, ready: make(chan struct{}, 1)}
	if err := o.replay(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open outbox %q: %w", opts.Dir, err)
	}
	if err := o.startSegment(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open outbox %q: %w", opts.Dir, err)
	}
	o.removeAckedSegments()
	if len(o.pending) > 0 {
		o.signal()
	}
	return o, nil
}

func (o *Outbox) readAcked() uint64 {
	b, err := os.ReadFile(filepath.Join(o.opts.Dir, ackFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil || len(b) != 12 || crc32.Checksum(b[:8], castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		// Losing the ack position only re-sends records; subscribers
		// drop sequence numbers they have seen.
		o.log.Warn("outbox ack file unreadable, re-sending from the oldest record", "err", err, "len", len(b))
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// writeAcked replaces the ack file atomically. It is not fsynced: after a
// power loss the previous position may come back, which re-sends records
// that subscribers then drop as already seen.
func (o *Outbox) writeAcked(seq uint64) error {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:], seq)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[:8], castagnoli))
	tmp := filepath.Join(o.opts.Dir, ackFile+".tmp")
	if err := os.WriteFile(tmp, b[:], 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(o.opts.Dir, ackFile))
}

func (o *Outbox) replay() error {
	o.acked = o.readAcked()
	entries, err := os.ReadDir(o.opts.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, segPrefix) || !strings.HasSuffix(name, segSuffix) {
			continue
		}
		num, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, segPrefix), segSuffix), 16, 64)
		if err != nil {
			continue
		}
		o.segs = append(o.segs, segment{num: num, path: filepath.Join(o.opts.Dir, name)})
	}
	sort.Slice(o.segs, func(i, j int) bool { return o.segs[i].num < o.segs[j].num })
	rs := replayState{dropped: map[uint64]bool{}}
	for i := range o.segs {
		if err := o.replaySegment(&o.segs[i], i == len(o.segs)-1, &rs); err != nil {
			return err
		}
	}
	dropped := rs.dropped
	o.lastSeq = max(o.acked, rs.maxData, rs.maxBase)
	kept := o.pending[:0]
	for _, r := range o.pending {
		if !dropped[r.Seq] {
			kept = append(kept, r)
		}
	}
	o.pending = kept
	for i := range o.pending {
		o.pendSize += o.pending[i].size()
	}
	return nil
}

// replayState is what replay carries from one segment to the next.
type replayState struct {
	maxData, maxBase uint64
	dropped          map[uint64]bool
}

func (o *Outbox) replaySegment(s *segment, last bool, rs *replayState) error {
	data, err := os.ReadFile(s.path)
	if err != nil {
		return err
	}
	off := 0
	for off < len(data) {
		r, kind, n, err := DecodeRecord(data[off:])
		if err != nil {
			o.st.TornRecords++
			if last {
				o.log.Warn("outbox: dropping torn last record", "segment", s.path, "offset", off, "bytes", len(data)-off, "err", err)
				if err := os.Truncate(s.path, int64(off)); err != nil {
					return fmt.Errorf("truncate torn tail of %s: %w", s.path, err)
				}
			} else {
				o.log.Error("outbox: corrupt record inside an older segment, skipping the rest of it",
					"segment", s.path, "offset", off, "bytes", len(data)-off, "err", err)
			}
			break
		}
		off += n
		s.maxSeq = max(s.maxSeq, r.Seq)
		switch kind {
		case KindBase:
			rs.maxBase = max(rs.maxBase, r.Seq)
		case KindDrop:
			rs.dropped[r.Seq] = true
		case KindData:
			// A seq seen before is a copy left by an interrupted compaction.
			if r.Seq <= rs.maxData {
				continue
			}
			rs.maxData = r.Seq
			if r.Seq > o.acked {
				r.Payload = append([]byte(nil), r.Payload...)
				o.pending = append(o.pending, r)
			}
		}
	}
	s.size = int64(off)
	return nil
}

// startSegment opens a new active segment beginning with a base record.
func (o *Outbox) startSegment() error {
	if o.active != nil {
		if err := o.active.Close(); err != nil {
			return err
		}
		o.active = nil
	}
	var num uint64 = 1
	if len(o.segs) > 0 {
		num = o.segs[len(o.segs)-1].num + 1
	}
	path := filepath.Join(o.opts.Dir, fmt.Sprintf("%s%016x%s", segPrefix, num, segSuffix))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	o.active = f
	o.segs = append(o.segs, segment{num: num, path: path})
	if err := o.write(KindBase, &Record{Seq: o.lastSeq}); err != nil {
		return err
	}
	return syncDir(o.opts.Dir)
}

// write appends one record to the active segment and fsyncs it.
func (o *Outbox) write(kind Kind, r *Record) error {
	o.buf = appendRecord(o.buf[:0], kind, r)
	if _, err := o.active.Write(o.buf); err != nil {
		return fmt.Errorf("write %s: %w", o.active.Name(), err)
	}
	if err := o.active.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", o.active.Name(), err)
	}
	s := &o.segs[len(o.segs)-1]
	s.size += int64(len(o.buf))
	s.maxSeq = max(s.maxSeq, r.Seq)
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (o *Outbox) signal() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// Ready receives a value after records were appended or replayed.
func (o *Outbox) Ready() <-chan struct{} { return o.ready }

// Append assigns the next sequence number, asks build for the record with
// it (so that payloads can carry their seq), and stores the record durably
// before returning its seq. When the record does not fit, the oldest
// droppable records are dropped first; if it still does not fit, Append
// returns ErrFull.
func (o *Outbox) Append(build func(seq uint64) (Record, error)) (uint64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, ErrClosed
	}
	seq := o.lastSeq + 1
	r, err := build(seq)
	if err != nil {
		return 0, err
	}
	r.Seq = seq
	if len(r.Topic) > 65535 || r.QoS > 2 {
		return 0, fmt.Errorf("append: bad topic length %d or qos %d", len(r.Topic), r.QoS)
	}
	need := r.size()
	if need > o.opts.MaxBytes {
		o.st.Refused++
		return 0, fmt.Errorf("append seq %d: record of %d bytes larger than the outbox: %w", seq, need, ErrFull)
	}
	if err := o.makeRoom(need); err != nil {
		return 0, fmt.Errorf("append seq %d: %w", seq, err)
	}
	if o.segs[len(o.segs)-1].size >= o.opts.SegmentBytes {
		if err := o.startSegment(); err != nil {
			return 0, fmt.Errorf("append: new segment: %w", err)
		}
		o.removeAckedSegments()
	}
	r.Payload = append([]byte(nil), r.Payload...)
	if err := o.write(KindData, &r); err != nil {
		return 0, fmt.Errorf("append seq %d: %w", seq, err)
	}
	o.lastSeq = seq
	o.pending = append(o.pending, r)
	o.pendSize += need
	o.st.Appended++
	o.signal()
	return seq, nil
}

// makeRoom drops the oldest droppable pending records until a record of
// need bytes fits; it writes a drop record for each.
func (o *Outbox) makeRoom(need int64) error {
	count := len(o.pending)
	fits := func() bool {
		return count+1 <= o.opts.MaxRecords && o.pendSize+need <= o.opts.MaxBytes
	}
	if fits() {
		return nil
	}
	kept := o.pending[:0]
	i := 0
	for ; i < len(o.pending) && !fits(); i++ {
		r := o.pending[i]
		if !r.Droppable {
			kept = append(kept, r)
			continue
		}
		if err := o.write(KindDrop, &Record{Seq: r.Seq}); err != nil {
			o.pending = append(kept, o.pending[i:]...)
			return err
		}
		count--
		o.pendSize -= r.size()
		o.st.DroppedUpdates++
		o.log.Warn("outbox full: dropped an update", "seq", r.Seq, "topic", r.Topic)
	}
	o.pending = append(kept, o.pending[i:]...)
	o.compactIfLarge()
	if !fits() {
		o.st.Refused++
		return ErrFull
	}
	return nil
}

// Pending appends to dst up to max pending records with Seq > after, in order.
func (o *Outbox) Pending(after uint64, max int, dst []Record) []Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := sort.Search(len(o.pending), func(i int) bool { return o.pending[i].Seq > after })
	for ; i < len(o.pending) && max > 0; i, max = i+1, max-1 {
		dst = append(dst, o.pending[i])
	}
	return dst
}

// Ack marks every record with Seq <= seq as delivered.
func (o *Outbox) Ack(seq uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	if seq <= o.acked {
		return nil
	}
	if seq > o.lastSeq {
		return fmt.Errorf("ack seq %d: beyond last seq %d", seq, o.lastSeq)
	}
	if err := o.writeAcked(seq); err != nil {
		return fmt.Errorf("ack seq %d: %w", seq, err)
	}
	o.acked = seq
	n := sort.Search(len(o.pending), func(i int) bool { return o.pending[i].Seq > seq })
	for i := 0; i < n; i++ {
		o.pendSize -= o.pending[i].size()
	}
	o.st.Acked += uint64(n)
	o.pending = append(o.pending[:0], o.pending[n:]...)
	o.removeAckedSegments()
	return nil
}

// removeAckedSegments deletes every non-active segment whose records are
// all acknowledged or dropped.
func (o *Outbox) removeAckedSegments() {
	oldestPending := o.lastSeq + 1
	if len(o.pending) > 0 {
		oldestPending = o.pending[0].Seq
	}
	kept := o.segs[:0]
	removed := false
	for i, s := range o.segs {
		if i < len(o.segs)-1 && s.maxSeq < oldestPending {
			if err := os.Remove(s.path); err != nil {
				o.log.Warn("outbox: remove segment", "segment", s.path, "err", err)
				kept = append(kept, s)
				continue
			}
			removed = true
			continue
		}
		kept = append(kept, s)
	}
	o.segs = kept
	if removed {
		_ = syncDir(o.opts.Dir)
	}
}

// compactIfLarge rewrites the pending records into a fresh segment when
// the files hold more than twice MaxBytes (dropped records in between
// pending ones keep old segments alive). A crash in the middle leaves
// copies with seqs already seen, which replay skips.
func (o *Outbox) compactIfLarge() {
	var disk int64
	for _, s := range o.segs {
		disk += s.size
	}
	if disk <= 2*o.opts.MaxBytes {
		return
	}
	old := append([]segment(nil), o.segs...)
	if err := o.startSegment(); err != nil {
		o.log.Error("outbox: compaction failed", "err", err)
		return
	}
	for i := range o.pending {
		if err := o.write(KindData, &o.pending[i]); err != nil {
			o.log.Error("outbox: compaction failed", "err", err)
			return
		}
	}
	for _, s := range old {
		if err := os.Remove(s.path); err != nil {
			o.log.Warn("outbox: remove compacted segment", "segment", s.path, "err", err)
		}
	}
	o.segs = o.segs[len(old):]
	_ = syncDir(o.opts.Dir)
	o.log.Info("outbox compacted", "pending", len(o.pending), "bytes_before", disk)
}

// Stats returns the counters.
func (o *Outbox) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.st
	s.Pending, s.PendingBytes, s.LastSeq, s.AckedSeq = len(o.pending), o.pendSize, o.lastSeq, o.acked
	for _, seg := range o.segs {
		s.DiskBytes += seg.size
	}
	return s
}

// Close closes the files; pending records stay on disk for the next Open.
func (o *Outbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.closed = true
	var err error
	if o.active != nil {
		err = o.active.Close()
	}
	return errors.Join(err, o.lock.Close())
}
