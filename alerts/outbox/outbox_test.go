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
	"slices"
	"strings"
	"sync"
	"testing"
)

func testOptions(dir string) Options {
	return Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 1 << 16}
}

func mustOpen(t *testing.T, o Options) *Outbox {
	t.Helper()
	b, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendN(t *testing.T, b *Outbox, n int, droppable bool, tag string) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := 0; i < n; i++ {
		seq, err := b.Append(func(seq uint64) (Record, error) {
			return Record{Topic: "t/" + tag, QoS: 1, Droppable: droppable, Payload: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

func pendingSeqs(b *Outbox) []uint64 {
	var out []uint64
	for _, r := range b.Pending(0, 1<<30, nil) {
		out = append(out, r.Seq)
	}
	return out
}

func TestReplayAfterReopen(t *testing.T) {
	dir := t.TempDir()
	b := mustOpen(t, testOptions(dir))
	appendN(t, b, 5, false, "a")
	if err := b.Ack(2); err != nil {
		t.Fatal(err)
	}
	b.Close()

	b = mustOpen(t, testOptions(dir))
	if got := pendingSeqs(b); !slices.Equal(got, []uint64{3, 4, 5}) {
		t.Fatalf("pending after reopen %v, want [3 4 5]", got)
	}
	recs := b.Pending(3, 1, nil)
	if len(recs) != 1 || recs[0].Seq != 4 || string(recs[0].Payload) != `{"seq":4}` || recs[0].Topic != "t/a" || recs[0].QoS != 1 {
		t.Fatalf("record %+v", recs)
	}
	if seqs := appendN(t, b, 1, false, "a"); seqs[0] != 6 {
		t.Fatalf("next seq %d, want 6", seqs[0])
	}
	if err := b.Ack(9); err == nil {
		t.Fatal("ack beyond the last seq accepted")
	}
	b.Close()
}

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	b := mustOpen(t, testOptions(dir))
	defer b.Close()
	if _, err := Open(testOptions(dir)); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second open: %v", err)
	}
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, segPrefix+"*"+segSuffix))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	slices.Sort(segs)
	return segs[len(segs)-1]
}

// TestTornAndCorruptTail: damage at the end of the last segment. A write
// cut short (torn, half a header) is discarded with a warning; a complete
// record with a bad checksum was fsynced and is reported lost. Either way
// its seq is never used again, and the report is not repeated on the next
// start.
func TestTornAndCorruptTail(t *testing.T) {
	for _, tc := range []struct {
		name       string
		damage     func(path string)
		want       []uint64
		torn, lost uint64
		log        string
		next       uint64
	}{
		{"torn", func(p string) {
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-5)
		}, []uint64{1, 2}, 1, 0, "incomplete last record", 4},
		{"bad checksum", func(p string) {
			data, _ := os.ReadFile(p)
			data[len(data)-1] ^= 0xff
			os.WriteFile(p, data, 0o640)
		}, []uint64{1, 2}, 0, 1, "lost=1 first_seq=3 last_seq=3", 4},
		{"half header", func(p string) {
			f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte{0x4f, 0x44, 0x42})
			f.Close()
		}, []uint64{1, 2, 3}, 1, 0, "incomplete last record", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := mustOpen(t, testOptions(dir))
			appendN(t, b, 3, false, "a")
			b.Close()
			os.Remove(filepath.Join(dir, ackFile)) // a crash: no clean close
			seg := lastSegment(t, dir)
			tc.damage(seg)

			var logs bytes.Buffer
			o := testOptions(dir)
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			b = mustOpen(t, o)
			defer b.Close()
			if got := pendingSeqs(b); !slices.Equal(got, tc.want) {
				t.Fatalf("pending %v, want %v", got, tc.want)
			}
			st := b.Stats()
			if st.TornRecords != tc.torn || st.LostRecords != tc.lost || !strings.Contains(logs.String(), tc.log) {
				t.Fatalf("torn %d lost %d, want %d %d; log %q", st.TornRecords, st.LostRecords, tc.torn, tc.lost, logs.String())
			}
			// The seq of the damaged or interrupted record is not used again.
			if seqs := appendN(t, b, 1, false, "b"); seqs[0] != tc.next {
				t.Fatalf("next seq %d, want %d", seqs[0], tc.next)
			}
			b.Close()
			os.Remove(filepath.Join(dir, ackFile))
			b = mustOpen(t, testOptions(dir))
			if got, st := pendingSeqs(b), b.Stats(); len(got) != len(tc.want)+1 || st.TornRecords != 0 || st.LostRecords != 0 || st.DamagedBytes != 0 {
				t.Fatalf("after repair pending %v stats %+v", got, st)
			}
		})
	}
}

func TestFullPolicy(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	o.MaxRecords = 4
	b := mustOpen(t, o)
	kinds := []struct {
		droppable bool
		want      []uint64
		err       error
	}{
		{false, []uint64{1}, nil},          // new
		{true, []uint64{1, 2}, nil},        // update
		{true, []uint64{1, 2, 3}, nil},     // update
		{false, []uint64{1, 2, 3, 4}, nil}, // end
		{false, []uint64{1, 3, 4, 5}, nil}, // new: the oldest update (2) goes
		{true, []uint64{1, 4, 5, 6}, nil},  // update: update 3 goes
		{false, []uint64{1, 4, 5, 7}, nil}, // new: update 6 goes
		{false, []uint64{1, 4, 5, 7}, ErrFull},
		{true, []uint64{1, 4, 5, 7}, ErrFull},
	}
	for i, k := range kinds {
		_, err := b.Append(func(seq uint64) (Record, error) {
			return Record{Topic: "e", QoS: 1, Droppable: k.droppable, Payload: []byte("x")}, nil
		})
		if !errors.Is(err, k.err) {
			t.Fatalf("append %d: error %v, want %v", i, err, k.err)
		}
		if got := pendingSeqs(b); !slices.Equal(got, k.want) {
			t.Fatalf("append %d: pending %v, want %v", i, got, k.want)
		}
	}
	st := b.Stats()
	if st.DroppedUpdates != 3 || st.Refused != 2 {
		t.Fatalf("stats %+v", st)
	}
	b.Close()
	b = mustOpen(t, o)
	defer b.Close()
	if got := pendingSeqs(b); !slices.Equal(got, []uint64{1, 4, 5, 7}) {
		t.Fatalf("drops not durable: pending %v", got)
	}
	// A refused record consumed no seq: the next one follows the last stored.
	b.Ack(7)
	if s := appendN(t, b, 1, false, "x"); s[0] != 8 {
		t.Fatalf("next seq %d, want 8", s[0])
	}
}

func TestSegmentsDeletedWhenAcked(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	o.SegmentBytes = 4096
	b := mustOpen(t, o)
	seqs := appendN(t, b, 200, false, strings.Repeat("x", 100))
	segs, _ := filepath.Glob(filepath.Join(dir, segPrefix+"*"))
	if len(segs) < 5 {
		t.Fatalf("%d segments for 200 records of ~130 bytes in 4 KiB segments", len(segs))
	}
	if err := b.Ack(seqs[len(seqs)-1]); err != nil {
		t.Fatal(err)
	}
	segs, _ = filepath.Glob(filepath.Join(dir, segPrefix+"*"))
	if len(segs) != 1 {
		t.Fatalf("%d segments left after acking everything, want the active one", len(segs))
	}
	b.Close()
	// Without the ack file every record of the active segment is resent,
	// but sequence numbers continue (the segment's base record keeps them).
	os.Remove(filepath.Join(dir, ackFile))
	b = mustOpen(t, o)
	defer b.Close()
	if s := appendN(t, b, 1, false, "y"); s[0] != 201 {
		t.Fatalf("next seq %d after losing the ack file, want 201", s[0])
	}
}

func TestCompactionBoundsDisk(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, MaxBytes: 64 << 10, MaxRecords: 100000, SegmentBytes: 8 << 10}
	b := mustOpen(t, o)
	appendN(t, b, 1, false, "new") // never acked: pins the oldest segment
	payload := bytes.Repeat([]byte("u"), 2000)
	for i := 0; i < 300; i++ {
		if _, err := b.Append(func(uint64) (Record, error) {
			return Record{Topic: "upd", QoS: 1, Droppable: true, Payload: payload}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	st := b.Stats()
	if st.DiskBytes > 2*o.MaxBytes+o.SegmentBytes+4096 {
		t.Fatalf("disk %d bytes, bound %d", st.DiskBytes, 2*o.MaxBytes+o.SegmentBytes)
	}
	if st.PendingBytes > o.MaxBytes || st.DroppedUpdates == 0 {
		t.Fatalf("stats %+v", st)
	}
	want := pendingSeqs(b)
	b.Close()
	b = mustOpen(t, o)
	defer b.Close()
	if got := pendingSeqs(b); !slices.Equal(got, want) || got[0] != 1 {
		t.Fatalf("after compaction and reopen: %d pending (first %d), want %d", len(got), got[0], len(want))
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Seq: 1, Topic: "a/b", QoS: 1, Payload: []byte("{}")},
		{Seq: 1 << 60, Topic: "", QoS: 0, Retain: true, Droppable: true, Payload: nil},
		{Seq: 7, Topic: strings.Repeat("t", 300), QoS: 2, Payload: bytes.Repeat([]byte{0}, 1000)},
	} {
		enc := appendRecord(nil, KindData, &r)
		got, kind, n, err := DecodeRecord(append(enc, 1, 2, 3))
		if err != nil || kind != KindData || n != len(enc) || got.Seq != r.Seq || got.Topic != r.Topic ||
			got.QoS != r.QoS || got.Retain != r.Retain || got.Droppable != r.Droppable || !bytes.Equal(got.Payload, r.Payload) {
			t.Fatalf("round trip of %+v: %+v kind %d n %d err %v", r, got, kind, n, err)
		}
		for cut := 0; cut < len(enc); cut++ {
			if _, _, _, err := DecodeRecord(enc[:cut]); !errors.Is(err, ErrTorn) {
				t.Fatalf("cut at %d of %d: %v, want ErrTorn", cut, len(enc), err)
			}
		}
		for i := range enc {
			bad := bytes.Clone(enc)
			bad[i] ^= 0x40
			if _, _, _, err := DecodeRecord(bad); err == nil {
				t.Fatalf("flipped bit in byte %d accepted", i)
			}
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, KindData, &Record{Seq: 3, Topic: "x/y", QoS: 1, Payload: []byte(`{"a":1}`)}))
	f.Add(appendRecord(nil, KindDrop, &Record{Seq: 9}))
	f.Add(appendRecord(nil, KindBase, &Record{Seq: 0}))
	f.Add([]byte{0x4f, 0x44, 0x42, 0x4f, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, kind, n, err := DecodeRecord(data)
		if err != nil {
			if !errors.Is(err, ErrTorn) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if n < headerSize || n > len(data) {
			t.Fatalf("length %d outside (header, %d]", n, len(data))
		}
		// A decodable record re-encodes to the same bytes.
		if enc := appendRecord(nil, kind, &r); !bytes.Equal(enc, data[:n]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", enc, data[:n])
		}
	})
}

// TestDropsAreSummarized: a full outbox drops an update for every new one;
// the log gets one line and one summary with the count, not one WARN per
// drop (issue 16: 2,920 lines in 40 s).
func TestDropsAreSummarized(t *testing.T) {
	var logs syncBuffer
	o := testOptions(t.TempDir())
	o.MaxRecords = 16
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := mustOpen(t, o)
	appendN(t, b, 500, true, "u")
	if st := b.Stats(); st.DroppedUpdates != 500-16 {
		t.Fatalf("dropped %d, want %d", st.DroppedUpdates, 500-16)
	}
	b.Close() // flushes the pending summary
	lines := strings.Count(logs.String(), "outbox full: dropped the oldest pending update")
	if lines != 2 || !strings.Contains(logs.String(), "repeated=483") {
		t.Fatalf("%d log lines for 484 drops, want 2 (the first and a summary with repeated=483):\n%s", lines, logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Ack file formats: a file of the first format (acked | crc, 12 bytes) is
// read, then replaced by the 20-byte format; a longer unreadable file is
// replaced by a 20-byte one at the first Ack, so it reads back. Each time
// the reopened outbox holds exactly the records after the ack position,
// and no temporary file stays behind.
func TestAckFileFormats(t *testing.T) {
	first := make([]byte, 12)
	binary.LittleEndian.PutUint64(first, 2)
	binary.LittleEndian.PutUint32(first[8:], crc32.Checksum(first[:8], castagnoli))
	for _, c := range []struct {
		name    string
		initial []byte
		want    []uint64 // pending after the first reopen
	}{
		{"first format", first, []uint64{3, 4, 5}},
		{"garbage, 40 bytes", bytes.Repeat([]byte{0xA5}, 40), []uint64{1, 2, 3, 4, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := mustOpen(t, testOptions(dir))
			appendN(t, b, 5, false, "a")
			b.Close()
			if err := os.WriteFile(filepath.Join(dir, ackFile), c.initial, 0o640); err != nil {
				t.Fatal(err)
			}
			b = mustOpen(t, testOptions(dir))
			if got := pendingSeqs(b); !slices.Equal(got, c.want) {
				t.Fatalf("pending %v, want %v", got, c.want)
			}
			if err := b.Ack(4); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(filepath.Join(dir, ackFile)); err != nil || fi.Size() != 20 {
				t.Fatalf("ack file after Ack: %v, %v; want 20 bytes", fi, err)
			}
			b.Close()
			b = mustOpen(t, testOptions(dir))
			defer b.Close()
			if got := pendingSeqs(b); !slices.Equal(got, []uint64{5}) {
				t.Fatalf("pending after reopen %v, want [5]", got)
			}
			if _, err := os.Stat(filepath.Join(dir, ackFile+".tmp")); !os.IsNotExist(err) {
				t.Fatalf("a temporary ack file exists: %v", err)
			}
		})
	}
}
