package outbox

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
)

// appendBatch appends n records tagged tag in one batch.
func appendBatch(b *Outbox, n int, droppable bool, tag string) (uint64, error) {
	return b.AppendBatch(n, func(i int, seq uint64) (Record, error) {
		return Record{Topic: "t/" + tag, QoS: 1, Droppable: droppable, Payload: []byte(fmt.Sprintf(`{"seq":%d,"i":%d}`, seq, i))}, nil
	})
}

// TestAppendBatchAllOrNothing: a batch is stored whole or not at all, for
// each way an append fails (no room even after dropping updates, a disk
// that fills up in the middle of the batch, with and without a working
// truncate), and the seqs it was offered are given to the next batch
// unless a partial write could not be cut off (then they are burned and
// never reused). After a reopen the outbox holds exactly the batches that
// were acknowledged.
func TestAppendBatchAllOrNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fail sets up the failure of the second batch (3 records) after
		// the first (2 records, seqs 1-2) was stored; it returns whether
		// the offered seqs 3-5 may be reused.
		fail   func(t *testing.T, o *Options, q *quota) (reuse bool)
		err    error
		policy bool // droppable updates are kept when dropping them would not be enough
	}{
		{"records bound", func(t *testing.T, o *Options, q *quota) bool { o.MaxRecords = 4; return true }, ErrFull, true},
		{"disk full mid-batch", func(t *testing.T, o *Options, q *quota) bool {
			o.WrapFile = func(f *os.File) File { return &quotaFile{File: f, q: q} }
			return true
		}, ErrNotWritable, false},
		{"disk full, truncate fails", func(t *testing.T, o *Options, q *quota) bool {
			o.WrapFile = func(f *os.File) File { return failingTruncate{&quotaFile{File: f, q: q}} }
			return false
		}, ErrNotWritable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(dir)
			q := &quota{limit: 1 << 30}
			reuse := tc.fail(t, &o, q)
			b := mustOpen(t, o)
			if first, err := appendBatch(b, 2, false, "a"); err != nil || first != 1 {
				t.Fatalf("first batch: seq %d, %v", first, err)
			}
			if tc.policy {
				// One droppable update: dropping it cannot make room for 3
				// more records under a bound of 4, so it must stay.
				appendN(t, b, 1, true, "u")
			}
			before := pendingSeqs(b)
			// Room for one and a half records of the next batch.
			q.limit = q.used + 40
			_, err := appendBatch(b, 3, false, "b")
			if !errors.Is(err, tc.err) {
				t.Fatalf("second batch: error %v, want %v", err, tc.err)
			}
			if got := pendingSeqs(b); !slices.Equal(got, before) {
				t.Fatalf("after a failed batch pending %v, want %v (nothing of the batch)", got, before)
			}
			q.limit = 1 << 30
			if tc.name == "records bound" {
				b.Close()
				o.MaxRecords = 1000
				b = mustOpen(t, o)
			}
			first, err := appendBatch(b, 3, false, "c")
			if err != nil {
				t.Fatalf("third batch: %v", err)
			}
			next := before[len(before)-1] + 1
			if reuse && first != next || !reuse && first < next+3 {
				t.Fatalf("third batch starts at seq %d; the failed batch was offered %d-%d (reuse allowed: %v)", first, next, next+2, reuse)
			}
			want := append(slices.Clone(before), first, first+1, first+2)
			b.Close()
			b = mustOpen(t, testOptions(dir))
			defer b.Close()
			recs := b.Pending(0, 100, nil)
			var got []uint64
			for _, r := range recs {
				got = append(got, r.Seq)
				if r.Topic == "t/b" {
					t.Fatalf("record %d of the failed batch replayed", r.Seq)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("after reopen pending %v, want %v", got, want)
			}
			if st := b.Stats(); st.LostRecords != 0 {
				t.Fatalf("after reopen %d records reported lost", st.LostRecords)
			}
		})
	}
}
