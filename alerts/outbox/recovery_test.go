package outbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// recordSpan is where one record sits in a segment file.
type recordSpan struct {
	seg       string
	off, n    int
	kind      Kind
	seq       uint64
	payload   []byte
	droppable bool
}

// layout decodes every segment of dir in order.
func layout(t testing.TB, dir string) []recordSpan {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, segPrefix+"*"+segSuffix))
	slices.Sort(segs)
	var out []recordSpan
	for _, s := range segs {
		data, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); {
			r, kind, n, err := DecodeRecord(data[off:])
			if err != nil {
				t.Fatalf("%s at %d: %v", s, off, err)
			}
			out = append(out, recordSpan{seg: s, off: off, n: n, kind: kind, seq: r.Seq, payload: bytes.Clone(r.Payload), droppable: r.Droppable})
			off += n
		}
	}
	return out
}

func payloadOf(seq uint64) []byte {
	return []byte(fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq, strings.Repeat("x", 60+int(seq%7))))
}

// buildLog writes n data records (seq 1..n) over several segments and
// closes the outbox; the ack file is removed, as after a crash.
func buildLog(t testing.TB, dir string, n int) {
	t.Helper()
	b, err := Open(Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 2048})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := b.Append(func(seq uint64) (Record, error) {
			return Record{Topic: "didoedge/v/front/events", QoS: 1, Payload: payloadOf(seq)}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	os.Remove(filepath.Join(dir, ackFile))
}

func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func flipByte(t testing.TB, path string, off int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x5a
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

// checkRecovered opens dir and checks that exactly the seqs in lost are
// missing from 1..n, that the others carry their payloads, that the lost
// count and range are reported (log and Stats), and that the next seq is
// n+1.
func checkRecovered(t *testing.T, dir string, n int, lost []uint64) {
	t.Helper()
	var logs bytes.Buffer
	b, err := Open(Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 2048,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	recs := b.Pending(0, 1<<30, nil)
	var want []uint64
	for s := uint64(1); s <= uint64(n); s++ {
		if !slices.Contains(lost, s) {
			want = append(want, s)
		}
	}
	var got []uint64
	for _, r := range recs {
		got = append(got, r.Seq)
		if !bytes.Equal(r.Payload, payloadOf(r.Seq)) {
			t.Fatalf("seq %d: payload %q", r.Seq, r.Payload)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pending %v\nwant    %v", got, want)
	}
	st := b.Stats()
	if st.LostRecords != uint64(len(lost)) || st.LostFirst != slices.Min(lost) || st.LostLast != slices.Max(lost) {
		t.Fatalf("lost %d (%d..%d), want %d %v; log:\n%s", st.LostRecords, st.LostFirst, st.LostLast, len(lost), lost, logs.String())
	}
	var logged []uint64
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "pending events lost") {
			continue
		}
		var first, last uint64
		for _, f := range strings.Fields(line) {
			fmt.Sscanf(f, "first_seq=%d", &first)
			fmt.Sscanf(f, "last_seq=%d", &last)
		}
		for s := first; s > 0 && s <= last; s++ {
			logged = append(logged, s)
		}
	}
	if slices.Sort(lost); !slices.Equal(logged, lost) {
		t.Fatalf("ERROR lines name seqs %v, want %v:\n%s", logged, lost, logs.String())
	}
	seq, err := b.Append(func(uint64) (Record, error) { return Record{Topic: "t", QoS: 1}, nil })
	if err != nil || seq != uint64(n)+1 {
		t.Fatalf("next seq %d (%v), want %d: a seq would be reused", seq, err, n+1)
	}
}

// TestOneFlippedByteLosesOneRecord flips, one at a time, every byte of a
// record in the middle of the last segment and of a record in the middle
// of an older segment: every other record is recovered, the loss is
// exactly that record, reported with its seq, and no seq is reused.
func TestOneFlippedByteLosesOneRecord(t *testing.T) {
	const n = 80
	orig := t.TempDir()
	buildLog(t, orig, n)
	spans := layout(t, orig)
	segs := []string{}
	for _, s := range spans {
		if !slices.Contains(segs, s.seg) {
			segs = append(segs, s.seg)
		}
	}
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	pick := func(seg string) recordSpan {
		var data []recordSpan
		for _, s := range spans {
			if s.seg == seg && s.kind == KindData {
				data = append(data, s)
			}
		}
		return data[len(data)/2]
	}
	targets := map[string]recordSpan{"last segment": pick(segs[len(segs)-1]), "older segment": pick(segs[1])}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			for i := 0; i < target.n; i++ {
				dir := copyDir(t, orig)
				flipByte(t, filepath.Join(dir, filepath.Base(target.seg)), target.off+i)
				checkRecovered(t, dir, n, []uint64{target.seq})
			}
			t.Logf("seq %d (%d bytes at offset %d of %s): every byte flipped in turn, 1 lost, %d of %d recovered each time",
				target.seq, target.n, target.off, filepath.Base(target.seg), n-1, n)
		})
	}
	t.Run("both at once", func(t *testing.T) {
		dir := copyDir(t, orig)
		a, b := targets["last segment"], targets["older segment"]
		flipByte(t, filepath.Join(dir, filepath.Base(a.seg)), a.off+a.n/2)
		flipByte(t, filepath.Join(dir, filepath.Base(b.seg)), b.off+b.n/2)
		checkRecovered(t, dir, n, []uint64{b.seq, a.seq})
	})
	t.Run("two adjacent records", func(t *testing.T) {
		dir := copyDir(t, orig)
		a := targets["older segment"]
		var next recordSpan
		for _, s := range spans {
			if s.seg == a.seg && s.seq == a.seq+1 && s.kind == KindData {
				next = s
			}
		}
		flipByte(t, filepath.Join(dir, filepath.Base(a.seg)), a.off+3)
		flipByte(t, filepath.Join(dir, filepath.Base(a.seg)), next.off+next.n-1)
		checkRecovered(t, dir, n, []uint64{a.seq, a.seq + 1})
	})
}

// quota is a shared byte budget for fault-injected segment files: a write
// that does not fit writes what fits and fails with ENOSPC, as a full
// file system does.
type quota struct {
	limit, used int64
}

type quotaFile struct {
	*os.File
	q    *quota
	size int64
}

func (f *quotaFile) Write(p []byte) (int, error) {
	room := f.q.limit - f.q.used
	if int64(len(p)) <= room {
		n, err := f.File.Write(p)
		f.q.used += int64(n)
		f.size += int64(n)
		return n, err
	}
	n, _ := f.File.Write(p[:max(room, 0)])
	f.q.used += int64(n)
	f.size += int64(n)
	return n, &os.PathError{Op: "write", Path: f.Name(), Err: errNoSpace}
}

func (f *quotaFile) Truncate(size int64) error {
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.q.used -= f.size - size
	f.size = size
	return nil
}

// failingTruncate cannot roll back a failed write either.
type failingTruncate struct{ *quotaFile }

func (f failingTruncate) Truncate(int64) error { return errNoSpace }

// TestFailedWriteLeavesNoPartialRecord: with the disk full, an append
// writes part of its record and fails; the part is cut off again, so that
// the records written after space returns replay (the bug of issue 16: a
// partial record poisoned everything after it).
func TestFailedWriteLeavesNoPartialRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(q *quota) func(*os.File) File
	}{
		{"truncate works", func(q *quota) func(*os.File) File {
			return func(f *os.File) File { return &quotaFile{File: f, q: q} }
		}},
		{"truncate fails too", func(q *quota) func(*os.File) File {
			return func(f *os.File) File { return failingTruncate{&quotaFile{File: f, q: q}} }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			q := &quota{limit: 3000}
			var logs bytes.Buffer
			o := Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 1 << 16, WrapFile: tc.wrap(q),
				Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			b := mustOpen(t, o)
			var ok []uint64
			var failed int
			for i := 0; i < 60; i++ {
				seq, err := b.Append(func(seq uint64) (Record, error) {
					return Record{Topic: "t", QoS: 1, Payload: payloadOf(seq)}, nil
				})
				switch {
				case err == nil:
					ok = append(ok, seq)
				case !isNotWritable(err):
					t.Fatalf("append: %v, want ErrNotWritable", err)
				default:
					failed++
				}
				if i == 40 {
					if b.Writable() == nil || !b.Stats().DiskFull {
						t.Fatalf("disk full not reported: %+v", b.Stats())
					}
					q.limit = 1 << 20 // space is back
				}
			}
			if failed == 0 || b.Writable() != nil || b.Stats().NotWritten != uint64(failed) {
				t.Fatalf("%d failed appends, writable %v, stats %+v", failed, b.Writable(), b.Stats())
			}
			last := ok[len(ok)-1]
			b.Close()
			os.Remove(filepath.Join(dir, ackFile)) // as after a crash
			logs.Reset()
			b = mustOpen(t, Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 1 << 16, Logger: o.Logger})
			defer b.Close()
			var got []uint64
			for _, r := range b.Pending(0, 1<<30, nil) {
				got = append(got, r.Seq)
			}
			if !slices.Equal(got, ok) {
				t.Fatalf("recovered %v\nwant      %v", got, ok)
			}
			if st := b.Stats(); st.LostRecords != 0 {
				t.Fatalf("recovery reports %d lost: %s", st.LostRecords, logs.String())
			}
			if seq := appendN(t, b, 1, false, "x")[0]; seq <= last {
				t.Fatalf("next seq %d reuses one at or below %d", seq, last)
			}
			t.Logf("%d events stored, %d refused while full, 0 lost, seqs 1..%d not reused", len(ok), failed, last)
		})
	}
}

var errNoSpace error = syscall.ENOSPC

func isNotWritable(err error) bool {
	return errors.Is(err, ErrNotWritable) && errors.Is(err, syscall.ENOSPC)
}

// FuzzRecovery damages a log of 60 records (some acknowledged, some
// updates dropped) with flips, truncations, overwrites and garbage segment
// files, then opens it. Open must succeed without a panic; every record
// whose bytes are intact and that is neither acknowledged nor dropped is
// pending with its payload, in seq order; no more pending records are lost
// than reported; and the next seq is above every seq in an intact record,
// and above every seq ever assigned. The last two need a trace of the
// records: with the ack file gone, records cut off the end of a segment
// may leave none (the log looks as if it ended there, as after a crash).
func FuzzRecovery(f *testing.F) {
	f.Add([]byte{0, 1, 0, 40})
	f.Add([]byte{1, 2, 0, 10, 0, 0, 1, 3})
	f.Add([]byte{2, 9, 'g', 'a', 'r', 'b', 'a', 'g', 'e'})
	f.Add([]byte{3, 0, 0, 0, 0xff, 0xff})
	f.Add([]byte{4, 1, 2, 3})
	f.Add([]byte{0, 2, 1, 200, 0, 2, 1, 201, 0, 2, 1, 202})
	orig := f.TempDir()
	{
		b, err := Open(Options{Dir: orig, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 2048})
		if err != nil {
			f.Fatal(err)
		}
		for i := 1; i <= 60; i++ {
			if _, err := b.Append(func(seq uint64) (Record, error) {
				return Record{Topic: "t", QoS: 1, Droppable: seq%5 == 0, Payload: payloadOf(seq)}, nil
			}); err != nil {
				f.Fatal(err)
			}
		}
		b.Ack(7)
		b.mu.Lock()
		for _, s := range []uint64{10, 25} { // drop two updates
			b.write(KindDrop, &Record{Seq: s})
			b.st.DroppedUpdates++
		}
		b.pending = slices.DeleteFunc(b.pending, func(r Record) bool { return r.Seq == 10 || r.Seq == 25 })
		b.mu.Unlock()
		b.Close()
	}
	spans := layout(f, orig)
	segs := []string{}
	for _, s := range spans {
		if !slices.Contains(segs, filepath.Base(s.seg)) {
			segs = append(segs, filepath.Base(s.seg))
		}
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		dir := copyDir(t, orig)
		files := map[string][]byte{}
		for _, s := range segs {
			files[s], _ = os.ReadFile(filepath.Join(dir, s))
		}
		cut := false
		keepAck := true
		for len(ops) >= 4 {
			op, a, b16 := ops[0]%5, int(ops[1]), int(binary.BigEndian.Uint16(ops[2:4]))
			ops = ops[4:]
			name := segs[a%len(segs)]
			data := files[name]
			switch op {
			case 0: // flip a byte
				if len(data) == 0 {
					continue
				}
				p := b16 % len(data)
				data[p] ^= byte(a | 1)
			case 1: // truncate
				p := b16 % (len(data) + 1)
				cut = cut || p < len(data)
				files[name] = data[:p]
			case 2: // a garbage segment file before, between or after the real ones
				k := min(len(ops), 1+a%64)
				g := fmt.Sprintf("%s%016x%s", segPrefix, uint64(b16%8)*3, segSuffix)
				if _, real := files[g]; real {
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, g), ops[:k], 0o640); err != nil {
					t.Fatal(err)
				}
				ops = ops[k:]
			case 3: // overwrite a range with garbage
				if len(data) == 0 {
					continue
				}
				p := b16 % len(data)
				k := min(len(data)-p, 1+a%40, len(ops))
				copy(data[p:p+k], ops[:k])
				ops = ops[k:]
			case 4: // the ack file is lost (a crash)
				os.Remove(filepath.Join(dir, ackFile))
				keepAck = false
			}
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o640); err != nil {
				t.Fatal(err)
			}
		}
		var logs bytes.Buffer
		b, err := Open(Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 2048,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer b.Close()
		defer func() {
			if t.Failed() {
				t.Logf("recovery log:\n%s", logs.String())
			}
		}()
		got := b.Pending(0, 1<<30, nil)
		bySeq := map[uint64][]byte{}
		for i, r := range got {
			if i > 0 && r.Seq <= got[i-1].Seq {
				t.Fatalf("pending out of order at %d: %d after %d", i, r.Seq, got[i-1].Seq)
			}
			bySeq[r.Seq] = r.Payload
		}
		origData := map[string][]byte{}
		for _, name := range segs {
			origData[name], _ = os.ReadFile(filepath.Join(orig, name))
		}
		intact := func(s recordSpan) bool {
			name := filepath.Base(s.seg)
			now, orig := files[name], origData[name]
			return len(now) >= s.off+s.n && bytes.Equal(now[s.off:s.off+s.n], orig[s.off:s.off+s.n])
		}
		acked := uint64(7)
		if !keepAck {
			acked = 0
		}
		var maxIntact, lostPending uint64
		for _, s := range spans {
			if s.kind != KindData {
				continue
			}
			live := s.seq > acked && s.seq != 10 && s.seq != 25
			if !intact(s) {
				if live {
					lostPending++
				}
				continue
			}
			maxIntact = max(maxIntact, s.seq)
			if live && !bytes.Equal(bySeq[s.seq], s.payload) {
				t.Fatalf("intact record seq %d not recovered (got %q)", s.seq, bySeq[s.seq])
			}
		}
		// Records cut off the end of a segment leave no trace once the ack
		// file (which records the last seq) is gone, unless a later base
		// record survives: the log may look as if it ended there.
		traceless := cut && !keepAck
		st := b.Stats()
		if !traceless && st.LostRecords+st.TornRecords < lostPending {
			t.Fatalf("%d pending records destroyed, %d reported lost and %d torn", lostPending, st.LostRecords, st.TornRecords)
		}
		seq, err := b.Append(func(uint64) (Record, error) { return Record{Topic: "t", QoS: 1}, nil })
		if err != nil {
			t.Fatal(err)
		}
		if seq <= maxIntact {
			t.Fatalf("next seq %d reuses one of an intact record (up to %d)", seq, maxIntact)
		}
		if !traceless && seq <= 60 {
			t.Fatalf("next seq %d reuses an assigned one (1..60)", seq)
		}
	})
}

// TestDroppedUpdatesAreNotReportedLost: a full outbox drops updates for a
// long time with nothing acknowledged (a broker outage); after a restart
// the dropped seqs are accounted for (their drop records, or the drop
// ranges of a compaction), so recovery reports nothing lost, and the
// pending records are the newest ones.
func TestDroppedUpdatesAreNotReportedLost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBytes int64
	}{{"no compaction", 1 << 20}, {"with compaction", 64 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Dir: dir, MaxBytes: tc.maxBytes, MaxRecords: 16, SegmentBytes: 4096}
			b := mustOpen(t, o)
			payload := bytes.Repeat([]byte("u"), 200)
			for range 1200 {
				if _, err := b.Append(func(uint64) (Record, error) {
					return Record{Topic: "t", QoS: 1, Droppable: true, Payload: payload}, nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			st := b.Stats()
			b.Close()
			os.Remove(filepath.Join(dir, ackFile)) // as after a crash
			var logs bytes.Buffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			b = mustOpen(t, o)
			defer b.Close()
			got := pendingSeqs(b)
			if s := b.Stats(); s.LostRecords != 0 || len(got) != 16 || got[0] != 1185 || got[15] != 1200 {
				t.Fatalf("after %d drops: lost %d, pending %v\n%s", st.DroppedUpdates, s.LostRecords, got, logs.String())
			}
		})
	}
}
