package outbox

// Recovery: replaying the segments on Open, accounting for damage.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// the log should be rewritten).
func (o *Outbox) replay() (bool, error) {
	acked, ackLast, ackMissing := o.readAcked()
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
	if ackMissing && len(o.pending) > 0 {
		// Nothing acknowledged before a crash, or the file was deleted:
		// either way every record goes again, which must not be silent.
		o.log.Warn("outbox: no ack file: re-sending every pending record from the oldest (subscribers drop the seqs they have seen)",
			"path", filepath.Join(o.opts.Dir, ackFile), "records", len(o.pending),
			"from_seq", o.pending[0].Seq, "to_seq", o.pending[len(o.pending)-1].Seq)
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
