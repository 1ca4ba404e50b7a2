package outbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	"github.com/didoedge/didoedge/internal/lograte"
)

// ErrFull is returned by Append when the record does not fit even after
// dropping every droppable record.
var ErrFull = errors.New("outbox full")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("outbox closed")

// ErrNotWritable is returned by Append when the record could not be
// written and fsynced (disk full, I/O error). The record is not stored and
// its seq is not used; the next Append tries again.
var ErrNotWritable = errors.New("outbox not writable")

// File is the part of *os.File the outbox writes segments through.
type File interface {
	Write(p []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
	Name() string
}

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
	// WrapFile, when set, wraps every file opened for writing: segments
	// and the ack file (fault-injection tests: a disk that fills up, a
	// power loss).
	WrapFile func(*os.File) File
	// dir, when set, replaces the os package's directory operations
	// (crash tests).
	dir dirOps
}

// Stats are the outbox counters since Open.
type Stats struct {
	Pending      int
	PendingBytes int64
	DiskBytes    int64
	LastSeq      uint64
	AckedSeq     uint64
	// AckedOnDisk is the ack position known to be in the ack file on
	// disk; until it reaches AckedSeq, a crash re-sends the events in
	// between (subscribers drop them by seq).
	AckedOnDisk    uint64
	Appended       uint64
	Acked          uint64
	DroppedUpdates uint64
	// Refused counts records refused because the outbox was full.
	Refused uint64
	// NotWritten counts records whose write or fsync failed (disk full,
	// I/O error): Append returned ErrNotWritable, nothing was stored.
	NotWritten uint64
	// TornRecords counts incomplete last records found on Open: a write
	// cut short by a crash before its fsync returned.
	TornRecords uint64
	// LostRecords counts pending records destroyed by damage found on
	// Open (a corrupt record); LostFirst and LostLast are the lowest and
	// highest lost seq. Every intact record around the damage is kept.
	LostRecords          uint64
	LostFirst, LostLast  uint64
	DamagedBytes         int64
	WriteFault           bool   // the last write failed; appends fail until one succeeds
	DiskFull             bool   // that failure was ENOSPC
	WriteFaultErr        string // its error
	WriteFaultSinceUnixS int64
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
	rl   *lograte.Limiter
	lock *os.File

	// ackMu serializes writes of the ack file; it is taken before mu,
	// never while holding it.
	ackMu    sync.Mutex
	mu       sync.Mutex
	closed   bool
	segs     []segment
	active   File     // nil while no segment could be started (write fault)
	pending  []Record // ordered by Seq
	pendSize int64
	lastSeq  uint64
	acked    uint64
	// ackSaved is the ack position known to be on disk (fsynced):
	// segments are deleted only up to it.
	ackSaved uint64
	ackDirty bool // the last write of the ack file failed
	ready    chan struct{}
	buf      []byte
	st       Stats
	fault    error // non-nil while writes fail
	// faultNeed is the size of the write that failed: Probe waits until
	// the file system has room for it before it tries again.
	faultNeed int64
	// burned are seqs of data records left partly written in an abandoned
	// segment; a drop record for each goes into the next segment, so that
	// replay does not count them as lost.
	burned []uint64
}

const (
	segPrefix, segSuffix = "seg-", ".log"
	ackFile              = "acked"
	lockFile             = "lock"
)

// Open opens or creates the outbox in opts.Dir and replays its log.
// Only one process may hold an outbox directory open at a time.
//
// Damaged records (a flipped byte, garbage) are skipped: replay
// resynchronizes on the next valid record, keeps every intact record, and
// reports the pending records lost (their count and seq range) at ERROR
// level and in Stats. Sequence numbers continue above every seq seen in
// any surviving record, in a damaged record's header, in the ack file, and
// in the base record of every segment, so they are never reused.
//
// When the directory is readable but no new segment can be written (disk
// full), Open succeeds in the write-fault state: pending records can be
// delivered and acknowledged, and appends start working when space
// returns.
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
	if opts.dir == nil {
		opts.dir = osDir{}
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
		return nil, fmt.Errorf("open outbox %q: locked by another process (is another didoedge running on this outbox.dir?): %w", opts.Dir, err)
	}
	log := opts.Logger.With("outbox", opts.Dir)
	o := &Outbox{opts: opts, log: log, rl: lograte.New(log, 0), lock: lock, ready: make(chan struct{}, 1)}
	damaged, err := o.replay()
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open outbox %q: %w", opts.Dir, err)
	}
	o.ackSaved = o.durableOnOpen(o.acked)
	if damaged {
		// Rewrite the intact pending records into a fresh segment so that
		// the damage is reported once, not on every start.
		o.rewrite("damaged records skipped")
	}
	if o.active == nil {
		if err := o.startSegment(); err != nil {
			o.setFault(err)
		}
	}
	o.removeAckedSegments()
	if len(o.pending) > 0 {
		o.signal()
	}
	return o, nil
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
// returns ErrFull. When the write fails (disk full), it returns
// ErrNotWritable: nothing is stored and the seq handed to build is not
// used by this record (the caller must not publish it).
func (o *Outbox) Append(build func(seq uint64) (Record, error)) (uint64, error) {
	return o.AppendBatch(1, func(_ int, seq uint64) (Record, error) { return build(seq) })
}

// AppendBatch appends n records all or nothing: they get consecutive seqs
// (build is asked for record i with seq first+i), are written with one
// fsync, and either every one is stored or none is (ErrFull when they do
// not fit together, ErrNotWritable when the write failed and was rolled
// back; no seq handed to build is used then). It returns the first seq.
// A reload queues the end events of every camera's episodes with it before
// it changes any engine. Droppable records make room as for Append, but
// only when that is enough for the whole batch.
func (o *Outbox) AppendBatch(n int, build func(i int, seq uint64) (Record, error)) (uint64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, ErrClosed
	}
	if n <= 0 {
		return 0, fmt.Errorf("append: batch of %d records", n)
	}
	first := o.lastSeq + 1
	recs := make([]Record, n)
	var need int64
	for i := range recs {
		seq := first + uint64(i)
		r, err := build(i, seq)
		if err != nil {
			return 0, err
		}
		r.Seq = seq
		if len(r.Topic) > 65535 || r.QoS > 2 {
			return 0, fmt.Errorf("append: bad topic length %d or qos %d", len(r.Topic), r.QoS)
		}
		r.Payload = append([]byte(nil), r.Payload...)
		recs[i] = r
		need += r.size()
	}
	what := fmt.Sprintf("append seq %d", first)
	if n > 1 {
		what = fmt.Sprintf("append seqs %d-%d", first, first+uint64(n-1))
	}
	if need > o.opts.MaxBytes || n > o.opts.MaxRecords {
		o.st.Refused += uint64(n)
		return 0, fmt.Errorf("%s: %d records of %d bytes larger than the outbox: %w", what, n, need, ErrFull)
	}
	if err := o.makeRoom(n, need); err != nil {
		if errors.Is(err, ErrNotWritable) {
			o.st.NotWritten += uint64(n)
		}
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if o.active != nil && o.segs[len(o.segs)-1].size >= o.opts.SegmentBytes {
		if err := o.startSegment(); err != nil {
			o.st.NotWritten += uint64(n)
			return 0, fmt.Errorf("%s: %w", what, o.failed(err))
		}
		o.removeAckedSegments()
	}
	if err := o.writeRecords(KindData, recs, true); err != nil {
		o.st.NotWritten += uint64(n)
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	o.lastSeq = first + uint64(n-1)
	o.pending = append(o.pending, recs...)
	o.pendSize += need
	o.st.Appended += uint64(n)
	o.signal()
	return first, nil
}

// makeRoom drops the oldest droppable pending records until n records of
// need bytes fit; it writes a drop record for each. When dropping every
// droppable record would not be enough, it drops none and returns ErrFull.
func (o *Outbox) makeRoom(n int, need int64) error {
	count := len(o.pending)
	fits := func() bool {
		return count+n <= o.opts.MaxRecords && o.pendSize+need <= o.opts.MaxBytes
	}
	if fits() {
		return nil
	}
	// Would dropping every droppable record make room? If not, none goes.
	dropN, dropSize := 0, int64(0)
	for i := range o.pending {
		if o.pending[i].Droppable {
			dropN++
			dropSize += o.pending[i].size()
		}
	}
	if count-dropN+n > o.opts.MaxRecords || o.pendSize-dropSize+need > o.opts.MaxBytes {
		o.st.Refused += uint64(n)
		return ErrFull
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
		o.rl.Warn("dropped update", "outbox full: dropped the oldest pending update to make room",
			"seq", r.Seq, "topic", r.Topic, "dropped_total", o.st.DroppedUpdates)
	}
	o.pending = append(kept, o.pending[i:]...)
	o.compactIfLarge()
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

// Ack marks every record with Seq <= seq as delivered and writes the
// position to the ack file (atomically, fsynced: writeAckFile) before the
// segments it covers are deleted. The position is kept in memory even when
// the ack file cannot be written (it is written again with the next Ack or
// Probe); losing it only re-sends delivered records.
func (o *Outbox) Ack(seq uint64) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return ErrClosed
	}
	if seq <= o.acked {
		o.mu.Unlock()
		return nil
	}
	if seq > o.lastSeq {
		o.mu.Unlock()
		return fmt.Errorf("ack seq %d: beyond last seq %d", seq, o.lastSeq)
	}
	o.acked = seq
	n := sort.Search(len(o.pending), func(i int) bool { return o.pending[i].Seq > seq })
	for i := 0; i < n; i++ {
		o.pendSize -= o.pending[i].size()
	}
	o.st.Acked += uint64(n)
	o.pending = append(o.pending[:0], o.pending[n:]...)
	o.mu.Unlock()
	o.persistAck()
	return nil
}

// Stats returns the counters.
func (o *Outbox) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.st
	s.Pending, s.PendingBytes, s.LastSeq, s.AckedSeq = len(o.pending), o.pendSize, o.lastSeq, o.acked
	s.AckedOnDisk = o.ackSaved
	for _, seg := range o.segs {
		s.DiskBytes += seg.size
	}
	return s
}

// Close closes the files; pending records stay on disk for the next Open.
func (o *Outbox) Close() error {
	o.ackMu.Lock()
	defer o.ackMu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.closed = true
	o.rl.Flush()
	// The ack file also records the last seq: a floor for the next Open.
	o.saveAckedLocked()
	var err error
	if o.active != nil {
		err = o.active.Close()
	}
	return errors.Join(err, o.lock.Close())
}
