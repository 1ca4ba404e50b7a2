package outbox

// The ack file: the acknowledged position and a floor for new seqs.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/didoedge/didoedge/internal/boundedfile"
	"github.com/didoedge/didoedge/pkg/durable"
)

// ackTemp is the name the ack file is written under before it is renamed
// over ackFile.
const ackTemp = ackFile + ".tmp"

// dirOps are the directory operations whose durability recovery relies
// on. Open uses the os package; the crash tests put a model underneath
// that forgets, at a simulated power loss, every change not yet synced.
type dirOps interface {
	Rename(from, to string) error
	Remove(path string) error
	SyncDir(dir string) error
}

type osDir struct{}

func (osDir) Rename(from, to string) error { return os.Rename(from, to) }
func (osDir) Remove(path string) error     { return os.Remove(path) }
func (osDir) SyncDir(dir string) error     { return durable.SyncDir(dir) }

// The ack file holds the highest acknowledged seq and the last seq
// assigned when it was written (a floor for new seqs), with a CRC-32C:
// acked u64 | last u64 | crc u32. Files of the first format (acked u64 |
// crc u32) are read too. missing reports that there is no ack file (replay
// says so when records are pending: all of them are re-sent).
func (o *Outbox) readAcked() (acked, last uint64, missing bool) {
	path := filepath.Join(o.opts.Dir, ackFile)
	b, err := boundedfile.Read("", path, boundedfile.Secret) // 20 bytes; bounded all the same
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, true
	}
	var why string
	switch {
	case err != nil:
		why = err.Error()
	case len(b) == 20 && crc32.Checksum(b[:16], castagnoli) == binary.LittleEndian.Uint32(b[16:]):
		return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), false
	case len(b) == 12 && crc32.Checksum(b[:8], castagnoli) == binary.LittleEndian.Uint32(b[8:]):
		return binary.LittleEndian.Uint64(b), 0, false
	case len(b) == 20 || len(b) == 12:
		why = "checksum mismatch (the file is damaged)"
	default:
		why = fmt.Sprintf("%d bytes, want 20", len(b))
	}
	// Losing the ack position only re-sends records; subscribers drop
	// sequence numbers they have seen.
	o.log.Warn("outbox: ack file unreadable, re-sending from the oldest record", "path", path, "reason", why)
	return 0, 0, false
}

// durableOnOpen makes the ack file that Open read durable before any
// segment is deleted on its strength: an earlier version wrote it in place
// without fsync, so what was read may still be only in the page cache. It
// returns the ack position that segment deletion may rely on.
func (o *Outbox) durableOnOpen(acked uint64) uint64 {
	_ = o.opts.dir.Remove(filepath.Join(o.opts.Dir, ackTemp)) // left by a crash during a write
	f, err := os.Open(filepath.Join(o.opts.Dir, ackFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err == nil {
		err = o.opts.dir.SyncDir(o.opts.Dir)
	}
	if err != nil {
		o.log.Warn("outbox: cannot sync the ack file; acknowledged segments stay until the next acknowledgement is written", "err", err)
		return 0
	}
	return acked
}

// writeAckFile replaces the ack file atomically: the 20 bytes go to a
// temporary file, which is fsynced and renamed over the ack file, then the
// directory is fsynced. After a crash at any point the file holds either
// the previous position or this one, never a torn mix, and once it returns
// nil the position survives a power loss: acknowledged segments may then
// be deleted (removeAckedSegments), which can leave this file the only
// record of how far seqs went.
//
// When the temporary file cannot be written (a full disk has no block for
// a new file), the existing file's 20 bytes are overwritten in place and
// fsynced instead: that needs no new block. A write of 20 bytes at the
// start of a file lies within one sector; were it torn nonetheless, the
// CRC fails and replay re-sends every pending record, and the newest
// segment, which is never deleted while no segment is open for writing,
// still holds the floor for new seqs.
func (o *Outbox) writeAckFile(acked, last uint64) error {
	var b [20]byte
	binary.LittleEndian.PutUint64(b[:], acked)
	binary.LittleEndian.PutUint64(b[8:], last)
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	path := filepath.Join(o.opts.Dir, ackFile)
	tmp := filepath.Join(o.opts.Dir, ackTemp)
	if err := o.writeSynced(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, b[:]); err != nil {
		_ = o.opts.dir.Remove(tmp)
		if fi, serr := os.Stat(path); serr != nil || fi.Size() != int64(len(b)) {
			return err
		}
		if ierr := o.writeSynced(path, os.O_WRONLY, b[:]); ierr != nil {
			return fmt.Errorf("%w; in place: %w", err, ierr)
		}
		return nil
	}
	if err := o.opts.dir.Rename(tmp, path); err != nil {
		return err
	}
	return o.opts.dir.SyncDir(o.opts.Dir)
}

// writeSynced writes b at the start of the file at path and fsyncs it.
func (o *Outbox) writeSynced(path string, flag int, b []byte) error {
	osf, err := os.OpenFile(path, flag, 0o640)
	if err != nil {
		return err
	}
	var f File = osf
	if o.opts.WrapFile != nil {
		f = o.opts.WrapFile(osf)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// persistAck writes the current ack position to the ack file and then
// deletes the segments it covers. The file is written without holding mu
// (an fsync of the file and one of the directory: Append does not wait for
// them); ackMu keeps one writer at a time, so a position never replaces a
// newer one.
func (o *Outbox) persistAck() {
	o.ackMu.Lock()
	defer o.ackMu.Unlock()
	o.mu.Lock()
	if o.closed || (o.acked == o.ackSaved && !o.ackDirty) {
		o.mu.Unlock()
		return
	}
	acked, last := o.acked, o.lastSeq
	o.mu.Unlock()
	err := o.writeAckFile(acked, last)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ackWritten(acked, err)
}

// saveAckedLocked writes the ack file with mu held (Close, Probe); the
// caller holds ackMu too.
func (o *Outbox) saveAckedLocked() {
	o.ackWritten(o.acked, o.writeAckFile(o.acked, o.lastSeq))
}

// ackWritten records the outcome of an ack file write of position acked;
// mu is held.
func (o *Outbox) ackWritten(acked uint64, err error) {
	if err != nil {
		o.ackDirty = true
		o.rl.Warn("ack file", "outbox: cannot write the ack file; the position is kept in memory and acknowledged segments stay on disk until it is written (a restart now would re-send delivered events, which subscribers drop by seq)",
			"seq", acked, "err", err)
		return
	}
	o.ackDirty = false
	o.ackSaved = max(o.ackSaved, acked)
	if !o.closed {
		o.removeAckedSegments()
	}
}
