package outbox

// Writing: segments, fsynced records, the write-fault state, removal
// and compaction of segments.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

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
		err = o.opts.dir.SyncDir(o.opts.Dir)
	}
	if err != nil {
		f.Close()
		_ = o.opts.dir.Remove(path)
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
	return o.writeRecords(kind, []Record{*r}, kind == KindData)
}

// writeRecords appends records of one kind to the active segment with one
// fsync. A failed write or fsync is rolled
// back (the file truncated to where the records began), so that no
// partial record stays in front of later ones; when even that fails, the
// segment is abandoned and the next write starts a new one. fresh tells
// records with new seqs (appends) from copies of pending ones (rewrite):
// the seqs of fresh records left partly written in an abandoned segment
// are burned, never given again.
func (o *Outbox) writeRecords(kind Kind, recs []Record, fresh bool) error {
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
			if fresh {
				for i := range recs {
					o.lastSeq = max(o.lastSeq, recs[i].Seq)
					o.burned = append(o.burned, recs[i].Seq)
				}
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
	o.ackMu.Lock()
	defer o.ackMu.Unlock()
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
		o.saveAckedLocked()
	}
	return nil
}

// removeAckedSegments deletes every non-active segment whose records are
// all acknowledged up to the position on disk (ackSaved): a segment
// deleted ahead of the ack file would, after a power loss, leave seqs that
// are neither pending nor acknowledged, reported lost. A segment of
// dropped updates not yet passed by the ack position stays (until then
// only its drop records account for those seqs at recovery; compaction
// rewrites them as drop ranges). While no segment is open for writing
// (write fault), the newest segment stays too: its records are a floor for
// new seqs that does not depend on the ack file alone.
func (o *Outbox) removeAckedSegments() {
	kept := o.segs[:0]
	removed := false
	for i, s := range o.segs {
		newest := i == len(o.segs)-1
		if !newest && s.maxSeq <= o.ackSaved {
			if err := o.opts.dir.Remove(s.path); err != nil {
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
		_ = o.opts.dir.SyncDir(o.opts.Dir)
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
	// The seqs between the ack position on disk and the last seq that
	// are not pending were acknowledged since the ack file was written,
	// dropped, or lost and reported: their data and drop records go with
	// the old segments, so one record per run says so.
	var ranges []Record
	next := o.ackSaved + 1
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
		if err := o.writeRecords(KindDropRange, ranges, false); err != nil {
			o.log.Error("outbox: rewrite failed", "why", why, "err", err)
			return
		}
	}
	if len(o.pending) > 0 {
		if err := o.writeRecords(KindData, o.pending, false); err != nil {
			o.log.Error("outbox: rewrite failed", "why", why, "err", err)
			return
		}
	}
	for _, s := range o.segs[:old] {
		if err := o.opts.dir.Remove(s.path); err != nil {
			o.log.Warn("outbox: remove rewritten segment", "segment", s.path, "err", err)
		}
	}
	o.segs = append(o.segs[:0], o.segs[old:]...)
	_ = o.opts.dir.SyncDir(o.opts.Dir)
	o.log.Info("outbox rewritten", "why", why, "pending", len(o.pending), "bytes_before", disk)
}
