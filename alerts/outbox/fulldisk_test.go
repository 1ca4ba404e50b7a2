package outbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writerEnv makes the test binary a writer process (TestHelperOutboxWriter).
const writerEnv = "DIDOEDGE_OUTBOX_WRITER_DIR"

// eventPayload is a 500-byte event body carrying its seq.
func eventPayload(seq uint64) []byte {
	p := []byte(fmt.Sprintf(`{"schema":"didoedge.event/1","seq":%d,"pad":"`, seq))
	p = append(p, bytes.Repeat([]byte("x"), 500-len(p)-2)...)
	return append(p, '"', '}')
}

// TestHelperOutboxWriter is not a test: it is the process that the full-disk
// test fills the disk with and kills. It reads commands on stdin:
// "append N" tries N appends and prints "ok SEQ" or "fail ERR" for each,
// then "done"; "grow" raises the fault-injection quota (when
// DIDOEDGE_OUTBOX_QUOTA is set; otherwise the test remounts the tmpfs).
func TestHelperOutboxWriter(t *testing.T) {
	dir := os.Getenv(writerEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	o := Options{Dir: dir, MaxBytes: 64 << 20, MaxRecords: 100000, SegmentBytes: 64 << 10,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	var q *quota
	if v := os.Getenv("DIDOEDGE_OUTBOX_QUOTA"); v != "" {
		limit, _ := strconv.ParseInt(v, 10, 64)
		q = &quota{limit: limit}
		o.WrapFile = func(f *os.File) File { return &quotaFile{File: f, q: q} }
	}
	b, err := Open(o)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "append":
			n, _ := strconv.Atoi(arg)
			for range n {
				seq, err := b.Append(func(seq uint64) (Record, error) {
					return Record{Topic: "didoedge/van/front/events", QoS: 1, Payload: eventPayload(seq)}, nil
				})
				switch {
				case err == nil:
					fmt.Println("ok", seq)
				case errors.Is(err, ErrNotWritable) && errors.Is(err, syscall.ENOSPC):
					fmt.Println("fail enospc")
				default:
					fmt.Println("fail", err)
				}
			}
			st := b.Stats()
			fmt.Println("done", st.NotWritten, st.DiskFull, b.Writable() == nil)
		case "grow":
			if q != nil {
				q.limit = 4 << 20
			}
			fmt.Println("done")
		}
	}
	os.Exit(0)
}

// TestFullDiskThenCrash is the reproduction of issue 16: the outbox's file
// system fills up (a 256 KiB tmpfs, or where mounting is not permitted a
// fault-injecting file wrapper with the same budget), events keep coming,
// space comes back (the tmpfs is remounted at 4 MiB), more events are
// queued, and the process is killed with SIGKILL. On restart every event
// whose Append returned (fsynced) is pending, none is reported lost, the
// events refused while the disk was full were each reported as not queued
// (ErrNotWritable wrapping ENOSPC), and no seq is reused.
//
// The wrapper variant always runs as well, so that both paths stay tested.
func TestFullDiskThenCrash(t *testing.T) {
	t.Run("tmpfs", func(t *testing.T) { fullDiskThenCrash(t, true) })
	t.Run("wrapper", func(t *testing.T) { fullDiskThenCrash(t, false) })
}

func fullDiskThenCrash(t *testing.T, tryMount bool) {
	dir := t.TempDir()
	mode := "tmpfs"
	env := []string{writerEnv + "=" + dir}
	err := errors.New("not tried")
	if tryMount {
		err = syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k,mode=0700")
	}
	if err != nil {
		mode = "fault-injecting file wrapper (mount: " + err.Error() + ")"
		env = append(env, "DIDOEDGE_OUTBOX_QUOTA=262144")
	} else {
		t.Cleanup(func() {
			if err := syscall.Unmount(dir, 0); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
	}
	t.Logf("full disk: %s", mode)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOutboxWriter$")
	cmd.Env = append(os.Environ(), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("writer stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 4096)
	go func(r io.Reader) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}(outPipe)
	var stored []uint64
	refused := 0
	run := func(command string) []string {
		t.Helper()
		fmt.Fprintln(in, command)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("writer ended during %q", command)
				}
				f := strings.Fields(l)
				switch f[0] {
				case "ok":
					seq, _ := strconv.ParseUint(f[1], 10, 64)
					stored = append(stored, seq)
				case "fail":
					if f[1] != "enospc" {
						t.Fatalf("append failed with %q, want ErrNotWritable wrapping ENOSPC", l)
					}
					refused++
				case "done":
					return f[1:]
				default:
					t.Fatalf("writer: %s", l)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("writer: no answer to %q", command)
			}
		}
	}
	run("append 100")
	if len(stored) != 100 || refused != 0 {
		t.Fatalf("%d stored, %d refused before the disk filled", len(stored), refused)
	}
	st := run("append 600") // 600 x ~540 bytes does not fit in 256 KiB
	if refused == 0 || st[0] != strconv.Itoa(refused) || st[1] != "true" || st[2] != "false" {
		t.Fatalf("disk full: %d refused, writer state %v (want not_written=%d disk_full=true writable=false)", refused, st, refused)
	}
	beforeGrow := len(stored)
	if mode == "tmpfs" {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=4m,mode=0700"); err != nil {
			t.Fatalf("remount: %v", err)
		}
	} else {
		run("grow")
	}
	refusedFull := refused
	st = run("append 300")
	if refused != refusedFull || len(stored) != beforeGrow+300 || st[1] != "false" || st[2] != "true" {
		t.Fatalf("after space came back: %d more refused, %d stored, state %v: the outbox did not recover without a restart",
			refused-refusedFull, len(stored)-beforeGrow, st)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	var logs bytes.Buffer
	b, err := Open(Options{Dir: dir, MaxBytes: 64 << 20, MaxRecords: 100000, SegmentBytes: 64 << 10,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pend := b.Pending(0, 1<<30, nil)
	if len(pend) != len(stored) {
		t.Fatalf("%d pending after the crash, %d were stored (fsynced); log:\n%s", len(pend), len(stored), logs.String())
	}
	for i, r := range pend {
		if r.Seq != stored[i] || !bytes.Equal(r.Payload, eventPayload(r.Seq)) {
			t.Fatalf("pending[%d] seq %d, stored seq %d (payload %q)", i, r.Seq, stored[i], r.Payload[:40])
		}
		if i > 0 && r.Seq <= pend[i-1].Seq {
			t.Fatalf("seq %d after %d", r.Seq, pend[i-1].Seq)
		}
	}
	if s := b.Stats(); s.LostRecords != 0 || s.DamagedBytes != 0 {
		t.Fatalf("recovery reports damage: %+v\n%s", s, logs.String())
	}
	next, err := b.Append(func(uint64) (Record, error) { return Record{Topic: "t", QoS: 1}, nil })
	if err != nil || next <= stored[len(stored)-1] {
		t.Fatalf("next seq %d (%v) reuses one at or below %d", next, err, stored[len(stored)-1])
	}
	t.Logf("%s: %d events produced, %d stored and fsynced, %d refused while the disk was full (each reported as not queued), "+
		"after SIGKILL %d recovered, 0 lost, seqs 1..%d never reused (next %d)",
		mode, len(stored)+refused, len(stored), refused, len(pend), stored[len(stored)-1], next)
}
