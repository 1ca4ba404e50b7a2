package record

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/mcapcheck"
)

func dirBytes(t testing.TB, dir string) (total int64, files int) {
	t.Helper()
	recs, err := listRecordings(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		total += r.size
	}
	return total, len(recs)
}

// TestBudget records well past the budget in small rotated files: after
// every frame the recordings on disk stay within the budget plus one file
// (rotate_bytes), the oldest files go first, other files are untouched and
// every file left opens in Foxglove's reader.
func TestBudget(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("not a recording"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A recording of an earlier run counts against the budget and goes first.
	old := filepath.Join(dir, "rec-20000101T000000.000Z-0001.mcap")
	if err := os.WriteFile(old, make([]byte, 300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Mode: ModeContinuous, Dir: dir, ChunkBytes: 64 << 10, RotateBytes: 256 << 10, BudgetBytes: 1 << 20,
		FrameFormat: "png", Maps: []string{}, Queue: 4}
	rec, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Noise does not compress: about 48 KiB per 128x128 PNG frame.
	s := newSynth("cam", 128, 128, 1, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(1_800_000_000, 0)
	var worst int64
	for k := 1; k <= 150; k++ {
		f := s.fill(k, t0, 15)
		for i := range f.RGB {
			f.RGB[i] = uint8(rng.IntN(256))
		}
		if !rec.Frame(f) {
			t.Fatalf("frame %d dropped", k)
		}
		waitIdle(t, rec)
		total, _ := dirBytes(t, dir)
		worst = max(worst, total)
		if total > cfg.BudgetBytes+cfg.RotateBytes {
			t.Fatalf("frame %d: %d bytes on disk, budget %d + one file %d", k, total, cfg.BudgetBytes, cfg.RotateBytes)
		}
	}
	closeRec(t, rec)
	st := rec.Stats()
	if st.FilesDeleted < 5 || st.FramesWritten != 150 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the oldest recording %s was kept", old)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file that is not a recording was touched: %v", err)
	}
	total, n := dirBytes(t, dir)
	t.Logf("wrote %d bytes in %d files, deleted %d; %d bytes in %d files left; worst total %d (budget %d, over by %d)",
		st.BytesWritten, st.FilesClosed, st.FilesDeleted, total, n, worst, cfg.BudgetBytes, max(0, worst-cfg.BudgetBytes))
	recs, _ := listRecordings(dir)
	frames := 0
	for _, r := range recs {
		frames += mcapcheck.Check(t, r.path).Counts["/cam/image"]
	}
	// The files left are the newest: their frames end with the last one.
	last := mcapcheck.Read(t, recs[len(recs)-1].path, "indexed").Sequences["/cam/image"]
	if last[len(last)-1] != 150 || frames >= 150 {
		t.Errorf("files left hold %d frames ending with %d", frames, last[len(last)-1])
	}
}

// TestRotateByTime: files are cut by recorded time.
func TestRotateByTime(t *testing.T) {
	dir := t.TempDir()
	rec, err := New(Config{Mode: ModeContinuous, Dir: dir, RotateTime: 2 * time.Second, Maps: []string{}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newSynth("cam", 16, 16, 1, 1)
	t0 := time.Unix(1_800_000_000, 0)
	for k := 0; k < 75; k++ { // 5 s at 15 fps
		rec.Frame(s.fill(k, t0, 15))
		waitIdle(t, rec)
	}
	closeRec(t, rec)
	recs, _ := listRecordings(dir)
	if len(recs) != 3 {
		t.Fatalf("%d files, want 3 (0-2 s, 2-4 s, 4-5 s)", len(recs))
	}
	for i, r := range recs {
		n := mcapcheck.Check(t, r.path).Counts["/cam/image"]
		if want := []int{30, 30, 15}[i]; n != want {
			t.Errorf("file %d: %d frames, want %d", i, n, want)
		}
	}
}
