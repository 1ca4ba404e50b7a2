package outbox

import (
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/didoedge/didoedge/pkg/durable"
)

// powerLoss models what a power loss keeps: a file's content as of its
// last fsync, and a directory's entries (creations, renames, removals) as
// of its last fsync. It sits under the outbox (Options.WrapFile for every
// file written, Options.dir for renames, removals and directory syncs);
// everything also happens on the real disk, and cut rewrites the
// directory to what survives. Operations are counted: with freezeAt >= 0
// the power goes at that operation, so nothing synced after it survives,
// while the outbox runs on as if nothing happened until cut.
type powerLoss struct {
	dir      string
	ops      int
	freezeAt int  // the number of operations that take effect durably; -1: all
	full     bool // a write that would grow a file fails with ENOSPC (a full disk)
	// failSync, when set, makes the fsync of files whose name starts
	// with it fail with EIO (a disk that reports a lost write).
	failSync string
	names    map[string]*plNode
	durable  map[string]*plNode
}

// plNode is one file (an inode): content is what survives of it.
type plNode struct {
	path    string
	content []byte
}

func newPowerLoss(t *testing.T, dir string) *powerLoss {
	m := &powerLoss{dir: dir, freezeAt: -1, names: map[string]*plNode{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == lockFile {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m.names[p] = &plNode{path: p, content: b}
	}
	m.durable = maps.Clone(m.names)
	return m
}

// step counts an operation and reports whether it happens before the
// power goes.
func (m *powerLoss) step() bool {
	m.ops++
	return m.freezeAt < 0 || m.ops <= m.freezeAt
}

func (m *powerLoss) wrap(f *os.File) File {
	n := m.names[f.Name()]
	if n == nil {
		n = &plNode{path: f.Name()}
		m.names[f.Name()] = n
	}
	return &plFile{File: f, m: m, n: n}
}

type plFile struct {
	*os.File
	m *powerLoss
	n *plNode
}

func (f *plFile) Write(p []byte) (int, error) {
	f.m.step()
	if f.m.full {
		off, _ := f.File.Seek(0, io.SeekCurrent)
		fi, err := f.File.Stat()
		if err != nil {
			return 0, err
		}
		// Segments are opened for appending: every write grows them.
		if strings.HasPrefix(filepath.Base(f.Name()), segPrefix) || off+int64(len(p)) > fi.Size() {
			return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
	}
	return f.File.Write(p)
}

func (f *plFile) Sync() error {
	durable := f.m.step()
	if f.m.failSync != "" && strings.HasPrefix(filepath.Base(f.Name()), f.m.failSync) {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: syscall.EIO}
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	if durable {
		b, err := os.ReadFile(f.n.path)
		if err != nil {
			return err
		}
		f.n.content = b
	}
	return nil
}

func (f *plFile) Truncate(size int64) error {
	f.m.step()
	return f.File.Truncate(size)
}

func (m *powerLoss) Rename(from, to string) error {
	m.step()
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if n := m.names[from]; n != nil {
		delete(m.names, from)
		n.path = to
		m.names[to] = n
	}
	return nil
}

func (m *powerLoss) Remove(path string) error {
	m.step()
	if err := os.Remove(path); err != nil {
		return err
	}
	delete(m.names, path)
	return nil
}

func (m *powerLoss) SyncDir(dir string) error {
	persisted := m.step()
	if err := durable.SyncDir(dir); err != nil {
		return err
	}
	if persisted {
		m.durable = maps.Clone(m.names)
	}
	return nil
}

// cut abandons o without closing it (its files are closed, its lock is
// released: the process is gone) and rewrites the directory to what
// survives the power loss.
func (m *powerLoss) cut(t *testing.T, o *Outbox) {
	t.Helper()
	if o.active != nil {
		o.active.Close()
	}
	o.lock.Close()
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != lockFile {
			if err := os.Remove(filepath.Join(m.dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, n := range m.durable {
		if err := os.WriteFile(name, n.content, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

// plRun is what the scenario saw, with the operation count at each point.
type plRun struct {
	appended   []uint64 // seqs Append returned
	appendedAt []int
	ackStart   []int // ops when each Ack began
	acked      []uint64
	maxSeq     uint64 // the highest seq handed to a build function
}

// powerLossScenario: events appended over several segments, some
// acknowledged; an acknowledgement whose ack file write fails (the fsync
// reports EIO), followed by enough events to start new segments (each
// start deletes acknowledged segments); a clean stop with events pending;
// a restart on a full
// disk (no segment can be started: the write-fault state), where the
// pending events are delivered and acknowledged, so every segment is
// acknowledged and the ack file is written in place (no block for a new
// file); a new event is refused. Then the power goes.
func powerLossScenario(t *testing.T, m *powerLoss) plRun {
	t.Helper()
	var run plRun
	opts := Options{Dir: m.dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 200, WrapFile: m.wrap, dir: m}
	add := func(o *Outbox, n int, wantErr bool) {
		for range n {
			seq, err := o.Append(func(seq uint64) (Record, error) {
				run.maxSeq = max(run.maxSeq, seq)
				return Record{Topic: "didoedge/v/front/events", QoS: 1, Payload: payloadOf(seq)}, nil
			})
			if wantErr != (err != nil) {
				t.Fatalf("append: %v (want an error: %v)", err, wantErr)
			}
			if err == nil {
				run.appended = append(run.appended, seq)
				run.appendedAt = append(run.appendedAt, m.ops)
			}
		}
	}
	ack := func(o *Outbox, seq uint64) {
		run.ackStart = append(run.ackStart, m.ops)
		run.acked = append(run.acked, seq)
		if err := o.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
	o := mustOpen(t, opts)
	add(o, 6, false)
	ack(o, 4)
	add(o, 2, false)
	ack(o, 8)
	m.failSync = ackFile
	add(o, 3, false)
	ack(o, 10)
	if !o.ackDirty {
		t.Fatal("the ack file was written although its fsync failed")
	}
	add(o, 3, false)
	m.failSync = ""
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	m.full = true
	o = mustOpen(t, opts)
	if o.Writable() == nil {
		t.Fatal("the outbox opened on a full disk is writable")
	}
	if got := pendingSeqs(o); !slices.Equal(got, []uint64{11, 12, 13, 14}) {
		t.Fatalf("pending on the full disk %v, want [11 12 13 14]", got)
	}
	ack(o, 14)
	add(o, 1, true)
	m.cut(t, o)
	return run
}

// TestPowerLossNeverLowersSeq cuts the power at every operation of
// powerLossScenario in turn (every write, fsync, truncation, rename,
// removal and directory fsync of segments and the ack file) and reopens
// the outbox on what survives. Each time: the next seq is above every seq
// Append returned before the cut (a seq is never reused, even when every
// segment was acknowledged and the ack file is the newest record of how
// far seqs went); every event appended before the cut and not acknowledged
// before it is pending; none is reported lost (a segment is deleted only
// once the ack file covering it is on disk).
func TestPowerLossNeverLowersSeq(t *testing.T) {
	total := powerLossScenario(t, newPowerLoss(t, t.TempDir()))
	m0 := newPowerLoss(t, t.TempDir())
	powerLossScenario(t, m0)
	ops := m0.ops
	if ops < 50 {
		t.Fatalf("the scenario has %d operations; it was written with about 100 in mind", ops)
	}
	for cutAt := 0; cutAt <= ops; cutAt++ {
		dir := t.TempDir()
		m := newPowerLoss(t, dir)
		m.freezeAt = cutAt
		run := powerLossScenario(t, m)
		if !slices.Equal(run.appended, total.appended) {
			t.Fatalf("cut at %d: the scenario ran differently: %v, want %v", cutAt, run.appended, total.appended)
		}
		var returned, ackedBefore uint64
		for i, at := range run.appendedAt {
			if at <= cutAt {
				returned = max(returned, run.appended[i])
			}
		}
		for i, at := range run.ackStart {
			if at <= cutAt {
				ackedBefore = max(ackedBefore, run.acked[i])
			}
		}
		o := mustOpen(t, Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 200})
		pending := pendingSeqs(o)
		for i, s := range run.appended {
			if run.appendedAt[i] <= cutAt && s > ackedBefore && !slices.Contains(pending, s) {
				t.Errorf("cut at %d/%d: seq %d (appended, not acknowledged before the cut) is not pending: %v", cutAt, ops, s, pending)
			}
		}
		st := o.Stats()
		if st.LostRecords != 0 {
			t.Errorf("cut at %d/%d: %d events reported lost (seqs %d-%d)", cutAt, ops, st.LostRecords, st.LostFirst, st.LostLast)
		}
		seq, err := o.Append(func(uint64) (Record, error) { return Record{Topic: "t", QoS: 1}, nil })
		if err != nil {
			t.Fatal(err)
		}
		if seq <= returned {
			t.Errorf("cut at %d/%d: next seq %d, but seq %d was already returned before the cut", cutAt, ops, seq, returned)
		}
		if errs := o.Close(); errs != nil {
			t.Fatal(errs)
		}
	}
}

// The scenario above needs the in-place fallback: check that it is taken
// (the ack file's blocks are reused) and that without it the position
// could not be written on the full disk at all.
func TestAckFileOnFullDiskInPlace(t *testing.T) {
	dir := t.TempDir()
	m := newPowerLoss(t, dir)
	o := mustOpen(t, Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 200, WrapFile: m.wrap, dir: m})
	appendN(t, o, 3, false, "a")
	if err := o.Ack(1); err != nil {
		t.Fatal(err)
	}
	m.full = true
	if err := o.Ack(3); err != nil {
		t.Fatal(err)
	}
	if o.ackDirty || o.ackSaved != 3 {
		t.Fatalf("on a full disk: ack file dirty %v, saved position %d; want written in place at 3", o.ackDirty, o.ackSaved)
	}
	if _, err := os.Stat(filepath.Join(dir, ackTemp)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a temporary ack file stayed behind: %v", err)
	}
	o.Close()
	o = mustOpen(t, testOptions(dir))
	defer o.Close()
	if st := o.Stats(); st.AckedSeq != 3 || st.LastSeq != 3 || st.Pending != 0 {
		t.Fatalf("reopened: acked %d, last %d, pending %d; want 3, 3, 0", st.AckedSeq, st.LastSeq, st.Pending)
	}
}
