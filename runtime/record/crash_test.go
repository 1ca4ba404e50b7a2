package record

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/mcapcheck"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
)

const crashEnv = "DIDOEDGE_RECORD_CRASH_DIR"

// TestMain runs the recorder child of TestCrash when re-executed with
// crashEnv set; it never returns then (the parent kills it).
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		recordForever(dir)
	}
	os.Exit(m.Run())
}

// recordForever records frames without drops until killed.
func recordForever(dir string) {
	rec, err := New(Config{Mode: ModeContinuous, Dir: dir, ChunkBytes: 64 << 10, Queue: 2}, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s := newSynth("cam", 96, 64, 48, 32)
	t0 := time.Unix(1_800_000_000, 0)
	for k := 1; ; k++ {
		for !rec.Frame(s.fill(k, t0, 15)) {
			time.Sleep(time.Millisecond) // wait for a slot: no frame is dropped
		}
	}
}

// TestCrash SIGKILLs a recording process mid-file three times: the file,
// which has no summary, still reads up to its last complete chunk with
// @mcap/core's stream reader and with the Go reader and replay source,
// which agree on every frame.
func TestCrash(t *testing.T) {
	for round, target := range []int64{150 << 10, 400 << 10, 900 << 10} {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+dir)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			killed := false
			defer func() {
				if !killed {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					_ = cmd.Wait()
				}
			}()
			var path string
			deadline := time.Now().Add(time.Minute)
			for {
				if time.Now().After(deadline) {
					t.Fatalf("the child wrote no %d bytes within a minute", target)
				}
				files, _ := filepath.Glob(filepath.Join(dir, "rec-*.mcap"))
				if len(files) == 1 {
					if fi, err := os.Stat(files[0]); err == nil && fi.Size() >= target {
						path = files[0]
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die of SIGKILL: %v", err)
			}
			fi, _ := os.Stat(path)

			st := mcapcheck.Read(t, path, "stream")
			if st.Complete || st.StreamError != "" {
				t.Fatalf("stream reader: complete %v, error %q on a killed file", st.Complete, st.StreamError)
			}
			images := st.Counts["/cam/image"]
			if images < 2 {
				t.Fatalf("stream reader read %d frames of %d bytes", images, fi.Size())
			}
			for i, s := range st.Sequences["/cam/image"] {
				if int(s) != i+1 {
					t.Fatalf("frame %d has sequence %d: frames are missing", i+1, s)
				}
			}
			for _, topic := range []string{"/cam/depth", "/cam/laplace_scale", "/cam/epistemic"} {
				// A chunk may end between a frame's image and its maps.
				if n := st.Counts[topic]; n != images && n != images-1 {
					t.Errorf("%s: %d messages for %d images", topic, n, images)
				}
			}

			rd, err := mcapsource.OpenReader(path)
			if err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			var m mcapsource.Message
			for {
				if err := rd.Next(&m); err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("Go reader: %v", err)
					}
					break
				}
				counts[m.Topic]++
			}
			rd.Close()
			if !rd.Truncated() || fmt.Sprint(counts) != fmt.Sprint(st.Counts) {
				t.Fatalf("Go reader: truncated %v, counts %v; @mcap/core %v", rd.Truncated(), counts, st.Counts)
			}

			src, err := mcapsource.Open(mcapsource.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var f camera.Frame
			n := 0
			for {
				if err := src.Next(t.Context(), &f); err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatal(err)
					}
					break
				}
				n++
				if f.Seq != uint64(n) || f.Width != 96 {
					t.Fatalf("replayed frame %d: seq %d, width %d", n, f.Seq, f.Width)
				}
			}
			if n != images || !src.Truncated() {
				t.Fatalf("replayed %d frames, @mcap/core read %d (truncated %v)", n, images, src.Truncated())
			}
			t.Logf("killed at %d bytes: %d frames readable", fi.Size(), n)
		})
	}
}
