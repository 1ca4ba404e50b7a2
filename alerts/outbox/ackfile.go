package outbox

// The ack file: the acknowledged position and a floor for new seqs.

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
)

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

func (o *Outbox) saveAcked() {
	if err := o.writeAcked(); err != nil {
		o.ackDirty = true
		o.rl.Warn("ack file", "outbox: cannot write the ack file; the position is kept in memory (a restart now would re-send delivered events, which subscribers drop by seq)",
			"seq", o.acked, "err", err)
		return
	}
	o.ackDirty = false
}
