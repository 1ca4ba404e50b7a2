package outbox

import (
	"bytes"
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
	"time"

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
	// WrapFile, when set, wraps every segment file opened for writing
	// (fault-injection tests: a disk that fills up).
	WrapFile func(*os.File) File
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

	mu       sync.Mutex
	closed   bool
	segs     []segment
	active   File     // nil while no segment could be started (write fault)
	pending  []Record // ordered by Seq
	pendSize int64
	lastSeq  uint64
	acked    uint64
	ackDirty bool     // the ack file is behind o.acked (a failed write)
	ackF     *os.File // the ack file, open once it was first written
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

// The ack file holds the highest acknowledged seq and the last seq
// assigned when it was written (a floor for new seqs), with a CRC-32C:
// acked u64 | last u64 | crc u32. Files of the first format (acked u64 |
// crc u32) are read too.
func (o *Outbox) readAcked() (acked, last uint64) {
	b, err := os.ReadFile(filepath.Join(o.opts.Dir, ackFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0
	}
	switch {
	case err == nil && len(b) == 20 && crc32.Checksum(b[:16], castagnoli) == binary.LittleEndian.Uint32(b[16:]):
		return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	case err == nil && len(b) == 12 && crc32.Checksum(b[:8], castagnoli) == binary.LittleEndian.Uint32(b[8:]):
		return binary.LittleEndian.Uint64(b), 0
	}
	// Losing the ack position only re-sends records; subscribers drop
	// sequence numbers they have seen.
	o.log.Warn("outbox ack file unreadable, re-sending from the oldest record", "err", err, "len", len(b))
	return 0, 0
}

// writeAcked overwrites the ack file's 20 bytes in place. It is not
// fsynced: after a power loss the previous position may come back, which
// re-sends records that subscribers then drop as already seen; a torn
// write fails the CRC and re-sends everything pending (readAcked). In
// place, not a new file renamed over the old one: a create, rename and
// unlink per acknowledgement are journaled metadata that the next
// event's fsync would have to commit with it (BenchmarkAppendAfterAck).
func (o *Outbox) writeAcked() error {
	var b [20]byte
	binary.LittleEndian.PutUint64(b[:], o.acked)
	binary.LittleEndian.PutUint64(b[8:], o.lastSeq)
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	if o.ackF == nil {
		f, err := os.OpenFile(filepath.Join(o.opts.Dir, ackFile), os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			return err
		}
		// Once per open: the file may be of the first format (12 bytes).
		if err := f.Truncate(int64(len(b))); err != nil {
			f.Close()
			return err
		}
		o.ackF = f
	}
	if _, err := o.ackF.WriteAt(b[:], 0); err != nil {
		o.ackF.Close()
		o.ackF = nil
		return err
	}
	return nil
}

// replay reads every segment. It reports whether damage was found (and
// the log should be rewritten).
func (o *Outbox) replay() (bool, error) {
	acked, ackLast := o.readAcked()
	o.acked = acked
	entries, err := os.ReadDir(o.opts.Dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, segPrefix) || !strings.HasSuffix(name, segSuffix) || !e.Type().IsRegular() {
			continue
		}
		num, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, segPrefix), segSuffix), 16, 64)
		if err != nil {
			continue
		}
		o.segs = append(o.segs, segment{num: num, path: filepath.Join(o.opts.Dir, name)})
	}
	sort.Slice(o.segs, func(i, j int) bool { return o.segs[i].num < o.segs[j].num })
	rs := replayState{dropped: map[uint64]bool{}, found: map[uint64]bool{}}
	for i := range o.segs {
		if err := o.replaySegment(&o.segs[i], i == len(o.segs)-1, &rs); err != nil {
			return false, err
		}
	}
	kept := o.pending[:0]
	for _, r := range o.pending {
		if !rs.isDropped(r.Seq) {
			kept = append(kept, r)
		}
	}
	o.pending = kept
	for i := range o.pending {
		o.pendSize += o.pending[i].size()
	}
	lost := o.account(&rs, ackLast)
	o.lastSeq = max(o.acked, rs.top)
	return len(rs.damage) > 0 || lost > 0, nil
}

// replayState is what replay carries from one segment to the next.
type replayState struct {
	maxData, maxBase uint64
	dropped          map[uint64]bool // seqs with a drop record
	dropRanges       [][2]uint64     // from drop-range records
	found            map[uint64]bool // seqs with an intact data record
	damage           []damage
	open             []int // damage entries still waiting for the next data record
	// top is the highest seq known to have been assigned, after account.
	top uint64
}

func (rs *replayState) isDropped(seq uint64) bool {
	if rs.dropped[seq] {
		return true
	}
	for _, r := range rs.dropRanges {
		if r[0] <= seq && seq <= r[1] {
			return true
		}
	}
	return false
}

// damage is one damaged byte range of a segment.
type damage struct {
	path     string
	off, n   int64
	prevData uint64 // highest data seq before the damage
	nextData uint64 // first data seq after it; 0 when none follows
	// floor is the highest seq known assigned before the range was
	// written (data and base records before it).
	floor uint64
	// records is how many records the range holds when its headers
	// still chain exactly over it (-1 when they do not); dataRecords how
	// many of them are data records.
	records, dataRecords int
	// torn: the range is the end of the last segment and holds one record
	// cut short: a header shorter than a header, or an intact header whose
	// body runs past the end of the file (a write interrupted by a crash
	// before its fsync returned).
	torn bool
}

// minDataRecord is the size of the smallest data record (empty topic and
// payload); no damaged range can hide more data records than its length
// divided by it.
const minDataRecord = headerSize + dataBodyHead

func (o *Outbox) replaySegment(s *segment, last bool, rs *replayState) error {
	data, err := os.ReadFile(s.path)
	if err != nil {
		return err
	}
	off := 0
	for off < len(data) {
		r, kind, n, err := DecodeRecord(data[off:])
		if err != nil {
			next := resync(data, off+1)
			d := damage{path: s.path, off: int64(off), n: int64(next - off), prevData: rs.maxData, floor: max(rs.maxData, rs.maxBase)}
			d.records, d.dataRecords = walkHeaders(data[off:next])
			d.torn = last && next == len(data) && errors.Is(err, ErrTorn) && d.records == -1 &&
				(len(data)-off < headerSize || intactHeader(data[off:]))
			rs.open = append(rs.open, len(rs.damage))
			rs.damage = append(rs.damage, d)
			off = next
			continue
		}
		off += n
		s.maxSeq = max(s.maxSeq, r.Seq)
		switch kind {
		case KindBase:
			rs.maxBase = max(rs.maxBase, r.Seq)
		case KindDrop:
			rs.dropped[r.Seq] = true
		case KindDropRange:
			rs.dropRanges = append(rs.dropRanges, [2]uint64{r.Seq, r.last})
			s.maxSeq = max(s.maxSeq, r.last)
		case KindData:
			rs.found[r.Seq] = true
			// A seq seen before is a copy left by an interrupted compaction.
			if r.Seq <= rs.maxData {
				continue
			}
			// Every open damage range has prevData == rs.maxData: no
			// newer data record came between them. The seqs in between
			// are counted once, against the first range.
			for j, i := range rs.open {
				d := &rs.damage[i]
				d.nextData = r.Seq
				if j > 0 {
					d.nextData = d.prevData + 1
				}
			}
			rs.open = rs.open[:0]
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

// account finds the pending records that damage destroyed, reports them
// (an ERROR line per damaged byte range, and one per run of lost seqs with
// its count and range) and returns their number.
//
// Seqs are assigned one by one, and each assigned seq has a data record
// until it is acknowledged (every seq up to the ack position is done) or
// dropped (a drop or drop-range record names it). So every seq up to the
// highest one known to have been assigned, the top, is accounted for, or
// lost. The top is the highest of: an intact data record's seq, a base
// record's (the last seq when its segment started), the ack file's last
// seq, and, for damaged ranges past the last intact data record, the seq
// known before each range plus one per data record that the range holds
// (its headers chain) or could hold (its length over the smallest
// record's) when they do not. An incomplete last
// record (a torn write) raises the top by one without counting as lost:
// its fsync never returned, so nobody was told it was queued.
func (o *Outbox) account(rs *replayState, ackLast uint64) uint64 {
	var tailTop uint64
	torn := false
	for i := range rs.damage {
		d := &rs.damage[i]
		o.st.DamagedBytes += d.n
		switch {
		case d.torn:
			torn = true
			o.st.TornRecords++
			o.log.Warn("outbox: discarding an incomplete last record (a write interrupted by a crash before its fsync returned; the event was never reported as queued)",
				"segment", d.path, "offset", d.off, "bytes", d.n)
			continue
		case d.nextData == 0 && d.records >= 0:
			tailTop = max(tailTop, d.floor) + uint64(d.dataRecords)
		case d.nextData == 0:
			tailTop = max(tailTop, d.floor) + uint64(d.n/minDataRecord)
		}
		o.log.Error("outbox: damaged bytes skipped on recovery; every intact record before and after them is kept",
			"segment", d.path, "offset", d.off, "bytes", d.n)
	}
	top := max(rs.maxData, tailTop, rs.maxBase, ackLast)
	for _, r := range rs.dropRanges {
		top = max(top, r[1])
	}
	rs.top = top
	if torn {
		rs.top = max(top, max(rs.maxData, tailTop)+1)
	}
	// Enumerate at most a bound proportional to MaxRecords: a larger range
	// can only come from a forged record.
	lo, hi := o.acked+1, top
	if limit := uint64(4*o.opts.MaxRecords + 1024); hi >= lo && hi-lo >= limit {
		hi = lo + limit - 1
	}
	var total uint64
	var runs int
	for s := lo; s <= hi; s++ {
		if rs.found[s] || rs.isDropped(s) {
			continue
		}
		first := s
		for s+1 <= hi && !rs.found[s+1] && !rs.isDropped(s+1) {
			s++
		}
		n := s - first + 1
		total += n
		runs++
		if runs <= 20 {
			o.log.Error("outbox: pending events lost to damaged or missing records",
				"lost", n, "first_seq", first, "last_seq", s)
		}
		if o.st.LostRecords == 0 {
			o.st.LostFirst = first
		}
		o.st.LostRecords += n
		o.st.LostLast = s
	}
	if runs > 20 {
		o.log.Error("outbox: pending events lost to damaged or missing records (total)", "lost", total, "runs", runs,
			"first_seq", o.st.LostFirst, "last_seq", o.st.LostLast)
	}
	return total
}

// resync returns the offset of the next record at or after from that
// decodes (magic, length and CRC-32C all valid), or len(data).
func resync(data []byte, from int) int {
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], recordMagic)
	for from < len(data) {
		i := bytes.Index(data[from:], magic[:])
		if i < 0 {
			return len(data)
		}
		at := from + i
		if _, _, _, err := DecodeRecord(data[at:]); err == nil {
			return at
		}
		from = at + 1
	}
	return len(data)
}

// intactHeader reports whether b starts with the magic and a body length
// a record can have.
func intactHeader(b []byte) bool {
	if len(b) < headerSize || binary.LittleEndian.Uint32(b) != recordMagic {
		return false
	}
	n := binary.LittleEndian.Uint32(b[4:])
	return n >= 9 && n <= maxBodySize
}

// walkHeaders follows the length fields of the records in a damaged range.
// When they chain exactly over it, the range holds that many records (a
// corrupt body, e.g. one flipped byte, leaves the headers intact), data of
// them data records (bodies longer than a drop or base record). It returns
// -1 records when the headers do not chain.
func walkHeaders(b []byte) (records, data int) {
	for p := 0; p < len(b); {
		if !intactHeader(b[p:]) {
			return -1, 0
		}
		n := int(binary.LittleEndian.Uint32(b[p+4:]))
		if p+headerSize+n > len(b) {
			return -1, 0
		}
		if n >= dataBodyHead {
			data++
		}
		records++
		p += headerSize + n
	}
	return records, data
}

// startSegment opens a new active segment beginning with a base record.
// On failure the previous active segment stays in use.
func (o *Outbox) startSegment() error {
	var num uint64 = 1
	if len(o.segs) > 0 {
		num = o.segs[len(o.segs)-1].num + 1
	}
	path := filepath.Join(o.opts.Dir, fmt.Sprintf("%s%016x%s", segPrefix, num, segSuffix))
	osf, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	var f File = osf
	if o.opts.WrapFile != nil {
		f = o.opts.WrapFile(osf)
	}
	b := appendRecord(nil, KindBase, &Record{Seq: o.lastSeq})
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(o.opts.Dir)
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("start a new segment: %w", err)
	}
	if o.active != nil {
		if err := o.active.Close(); err != nil {
			o.log.Warn("outbox: close segment", "segment", o.active.Name(), "err", err)
		}
	}
	o.active = f
	o.segs = append(o.segs, segment{num: num, path: path, size: int64(len(b)), maxSeq: o.lastSeq})
	return nil
}

// write appends one record to the active segment and fsyncs it (see
// writeRecords).
func (o *Outbox) write(kind Kind, r *Record) error {
	return o.writeRecords(kind, []Record{*r})
}

// writeRecords appends records of one kind to the active segment with one
// fsync. A failed write or fsync is rolled
// back (the file truncated to where the records began), so that no
// partial record stays in front of later ones; when even that fails, the
// segment is abandoned and the next write starts a new one.
func (o *Outbox) writeRecords(kind Kind, recs []Record) error {
	if o.active == nil {
		if err := o.startSegment(); err != nil {
			return o.failed(err)
		}
		o.removeAckedSegments()
		for len(o.burned) > 0 {
			if err := o.write(KindDrop, &Record{Seq: o.burned[0]}); err != nil {
				return err
			}
			o.burned = o.burned[1:]
		}
	}
	n := len(recs)
	s := &o.segs[len(o.segs)-1]
	var err error
	var maxSeq uint64
	written := int64(0)
	for i := 0; i < n && err == nil; {
		o.buf = o.buf[:0]
		for ; i < n && (len(o.buf) < 1<<20 || i == 0); i++ {
			o.buf = appendRecord(o.buf, kind, &recs[i])
			maxSeq = max(maxSeq, recs[i].Seq)
		}
		_, err = o.active.Write(o.buf)
		written += int64(len(o.buf))
	}
	if err == nil {
		err = o.active.Sync()
	}
	if err != nil {
		// The error (an *os.PathError) names the file and the operation.
		o.faultNeed = written
		if terr := o.active.Truncate(s.size); terr != nil {
			o.log.Error("outbox: cannot truncate a failed write; abandoning the segment", "segment", o.active.Name(), "err", terr)
			o.active.Close()
			o.active = nil
			// The partial record stays at the end of that segment; replay
			// skips it. Its seq must not be used again.
			if kind == KindData && n == 1 {
				o.lastSeq = max(o.lastSeq, recs[0].Seq)
				o.burned = append(o.burned, recs[0].Seq)
			}
		}
		return o.failed(err)
	}
	s.size += written
	s.maxSeq = max(s.maxSeq, maxSeq)
	o.healed()
	return nil
}

// failed enters (or stays in) the write-fault state and returns err
// wrapped in ErrNotWritable.
func (o *Outbox) failed(err error) error {
	o.setFault(err)
	return fmt.Errorf("%w: %w", ErrNotWritable, err)
}

func (o *Outbox) setFault(err error) {
	if o.fault == nil {
		o.st.WriteFaultSinceUnixS = time.Now().Unix()
		o.rl.Error("write fault", "outbox: cannot write; new events are refused (and reported as not queued) until a write succeeds; pending events are still delivered",
			"err", err, "disk_full", errors.Is(err, syscall.ENOSPC))
	}
	o.fault = err
	o.st.WriteFault, o.st.DiskFull, o.st.WriteFaultErr = true, errors.Is(err, syscall.ENOSPC), err.Error()
}

func (o *Outbox) healed() {
	if o.fault == nil {
		return
	}
	o.rl.Log(slog.LevelInfo, "healed", "outbox: writable again", "down_for", time.Since(time.Unix(o.st.WriteFaultSinceUnixS, 0)).Round(time.Second).String(),
		"not_written", o.st.NotWritten)
	o.fault = nil
	o.st.WriteFault, o.st.DiskFull, o.st.WriteFaultErr, o.st.WriteFaultSinceUnixS = false, false, "", 0
}

// Writable returns nil when the last write succeeded, else the error that
// keeps the outbox from storing new records (see Probe).
func (o *Outbox) Writable() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	return o.fault
}

// Probe tries a write (a base record, which replay reads as a floor for
// seqs) while the outbox is in the write-fault state, so that the state
// ends when space returns even if no event is appended. When the fault was
// ENOSPC it first asks the file system for room for twice the write that
// failed: a base record fits in less than an event, and ending the state
// for it alone would only make the next event fail again. It returns the
// state after the try.
func (o *Outbox) Probe() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	if o.fault == nil {
		return nil
	}
	if errors.Is(o.fault, syscall.ENOSPC) {
		var fs syscall.Statfs_t
		if err := syscall.Statfs(o.opts.Dir, &fs); err == nil && int64(fs.Bavail)*int64(fs.Bsize) < 2*o.faultNeed {
			return o.fault
		}
	}
	if err := o.write(KindBase, &Record{Seq: o.lastSeq}); err != nil {
		return o.fault
	}
	if o.ackDirty {
		o.saveAcked()
	}
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
// returns ErrFull. When the write fails (disk full), it returns
// ErrNotWritable: nothing is stored and the seq handed to build is not
// used by this record (the caller must not publish it).
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
		if errors.Is(err, ErrNotWritable) {
			o.st.NotWritten++
		}
		return 0, fmt.Errorf("append seq %d: %w", seq, err)
	}
	if o.active != nil && o.segs[len(o.segs)-1].size >= o.opts.SegmentBytes {
		if err := o.startSegment(); err != nil {
			o.st.NotWritten++
			return 0, fmt.Errorf("append seq %d: %w", seq, o.failed(err))
		}
		o.removeAckedSegments()
	}
	r.Payload = append([]byte(nil), r.Payload...)
	if err := o.write(KindData, &r); err != nil {
		o.st.NotWritten++
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
		o.rl.Warn("dropped update", "outbox full: dropped the oldest pending update to make room",
			"seq", r.Seq, "topic", r.Topic, "dropped_total", o.st.DroppedUpdates)
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

// Ack marks every record with Seq <= seq as delivered. The position is
// kept in memory even when the ack file cannot be written (it is written
// again with the next Ack); losing it only re-sends delivered records.
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
	o.acked = seq
	n := sort.Search(len(o.pending), func(i int) bool { return o.pending[i].Seq > seq })
	for i := 0; i < n; i++ {
		o.pendSize -= o.pending[i].size()
	}
	o.st.Acked += uint64(n)
	o.pending = append(o.pending[:0], o.pending[n:]...)
	o.saveAcked()
	o.removeAckedSegments()
	return nil
}

func (o *Outbox) saveAcked() {
	if err := o.writeAcked(); err != nil {
		o.ackDirty = true
		o.rl.Warn("ack file", "outbox: cannot write the ack file; the position is kept in memory (a restart now would re-send delivered events, which subscribers drop by seq)",
			"seq", o.acked, "err", err)
		return
	}
	o.ackDirty = false
}

// removeAckedSegments deletes every non-active segment whose records are
// all acknowledged. A segment of dropped updates not yet passed by the ack
// position stays (until then only its drop records account for those
// seqs at recovery; compaction rewrites them as drop ranges).
func (o *Outbox) removeAckedSegments() {
	kept := o.segs[:0]
	removed := false
	for i, s := range o.segs {
		active := i == len(o.segs)-1 && o.active != nil
		if !active && s.maxSeq <= o.acked {
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
// pending ones keep old segments alive).
func (o *Outbox) compactIfLarge() {
	var disk int64
	for _, s := range o.segs {
		disk += s.size
	}
	if disk <= 2*o.opts.MaxBytes {
		return
	}
	o.rewrite("compacted")
}

// rewrite copies the pending records into a fresh segment and deletes
// every older one. A crash in the middle leaves copies with seqs already
// seen, which replay skips; a failure leaves the old segments in place.
func (o *Outbox) rewrite(why string) {
	var disk int64
	for _, s := range o.segs {
		disk += s.size
	}
	old := len(o.segs)
	if err := o.startSegment(); err != nil {
		o.log.Error("outbox: rewrite failed", "why", why, "err", err)
		return
	}
	// The seqs between the ack position and the last seq that are not
	// pending were dropped (or lost and reported): their data and drop
	// records go with the old segments, so one record per run says so.
	var ranges []Record
	next := o.acked + 1
	for _, r := range o.pending {
		if r.Seq > next {
			ranges = append(ranges, Record{Seq: next, last: r.Seq - 1})
		}
		next = r.Seq + 1
	}
	if next <= o.lastSeq {
		ranges = append(ranges, Record{Seq: next, last: o.lastSeq})
	}
	if len(ranges) > 0 {
		if err := o.writeRecords(KindDropRange, ranges); err != nil {
			o.log.Error("outbox: rewrite failed", "why", why, "err", err)
			return
		}
	}
	if len(o.pending) > 0 {
		if err := o.writeRecords(KindData, o.pending); err != nil {
			o.log.Error("outbox: rewrite failed", "why", why, "err", err)
			return
		}
	}
	for _, s := range o.segs[:old] {
		if err := os.Remove(s.path); err != nil {
			o.log.Warn("outbox: remove rewritten segment", "segment", s.path, "err", err)
		}
	}
	o.segs = append(o.segs[:0], o.segs[old:]...)
	_ = syncDir(o.opts.Dir)
	o.log.Info("outbox rewritten", "why", why, "pending", len(o.pending), "bytes_before", disk)
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
	o.rl.Flush()
	// The ack file also records the last seq: a floor for the next Open.
	o.saveAcked()
	var err error
	if o.active != nil {
		err = o.active.Close()
	}
	if o.ackF != nil {
		err = errors.Join(err, o.ackF.Close())
	}
	return errors.Join(err, o.lock.Close())
}
