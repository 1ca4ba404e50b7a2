package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
)

// testSnapshot: a 128x64 grey frame, a 64x32 epistemic map that is hot
// (K/S 0.9, tau_e 0.3) in its right half and cold (0.05) in its left, a
// triangular zone, a critical event at a capture time with milliseconds.
func testSnapshot(timeMS int64) *alerts.Snapshot {
	img := alerts.Image{Width: 128, Height: 64, RGB: make([]uint8, 128*64*3)}
	for i := range img.RGB {
		img.RGB[i] = 128
	}
	m := alerts.Maps{Width: 64, Height: 32, Epistemic: make([]float32, 64*32)}
	for y := range 32 {
		for x := range 64 {
			m.Epistemic[y*64+x] = 0.05
			if x >= 32 {
				m.Epistemic[y*64+x] = 0.9
			}
		}
	}
	ev := &alerts.Event{ID: "front-lane-" + strconv.FormatInt(timeMS, 10) + "-7", Type: alerts.EventNew, Level: alerts.LevelCritical,
		TimeMS: timeMS, FrameSeq: 42, Snapshot: &alerts.SnapshotRef{FrameSeq: 42, TimeMS: timeMS}}
	return &alerts.Snapshot{Event: ev, Image: img, Maps: m, TauE: 0.3,
		Zone: alerts.Zone{Name: "lane", Polygon: [][2]float64{{0.25, 0.25}, {0.75, 0.25}, {0.75, 0.75}, {0.25, 0.75}}}}
}

// ffprobeTime reads the EXIF capture time of a JPEG with ffprobe.
func ffprobeTime(t *testing.T, path string) (time.Time, string) {
	t.Helper()
	bin, err := exec.LookPath("ffprobe")
	if err != nil {
		t.Fatal("ffprobe not installed (scripts/deps.sh installs it)")
	}
	out, err := exec.Command(bin, "-v", "error", "-show_frames", "-show_entries", "frame=width,height:frame_tags", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ffprobe %s: %v\n%s", path, err, out)
	}
	tag := func(name string) string {
		m := regexp.MustCompile(`(?m)^TAG:` + name + `=(.*)$`).FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("ffprobe shows no %s:\n%s", name, out)
		}
		return strings.TrimSpace(m[1])
	}
	ts, err := time.Parse("2006:01:02 15:04:05", tag("DateTimeOriginal"))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := strconv.Atoi(tag("SubSecTimeOriginal"))
	if err != nil {
		t.Fatal(err)
	}
	return ts.Add(time.Duration(ms) * time.Millisecond), string(out)
}

// TestRenderDecodesAndCarriesTheFrameTime: Go's image/jpeg and ffprobe
// both decode the snapshot; ffprobe reads the event's frame time from its
// EXIF block; the heat map reddens the hot half; the outline has the
// critical colour.
func TestRenderDecodesAndCarriesTheFrameTime(t *testing.T) {
	const timeMS = 1_763_772_067_412
	s := testSnapshot(timeMS)
	var buf bytes.Buffer
	if err := Render(&buf, s, 90); err != nil {
		t.Fatal(err)
	}
	img, err := jpeg.Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 128 || b.Dy() != 64 {
		t.Fatalf("size %v, want the frame's 128x64", b)
	}
	rgb := func(x, y int) (int, int, int) {
		r, g, b, _ := img.At(x, y).RGBA()
		return int(r >> 8), int(g >> 8), int(b >> 8)
	}
	// Cold: K/S 0.05/0.6 of the ramp, between dark blue and cyan: blue
	// dominates. Hot: K/S 0.9 clamps at the red end. Blended at 0.45 over
	// grey 128: red 0.55*128 + 0.45*220 = 169 on the hot side.
	cr, _, cb := rgb(10, 40)
	hr, hg, hb := rgb(118, 40)
	if !(cb > cr+20) || !(hr > 160 && hr > hg+50 && hr > hb+50) {
		t.Fatalf("cold pixel %d,_,%d; hot pixel %d,%d,%d", cr, cb, hr, hg, hb)
	}
	// The zone's left edge at x = 32, inside y 16..48: critical red.
	if r, g, b := rgb(32, 32); !(r > 200 && g < 90 && b < 90) {
		t.Fatalf("outline pixel %d,%d,%d, want critical red", r, g, b)
	}
	path := filepath.Join(t.TempDir(), "s.jpg")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, out := ffprobeTime(t, path)
	if !got.Equal(time.UnixMilli(timeMS).UTC()) {
		t.Fatalf("EXIF time %v, want the event's frame time %v", got, time.UnixMilli(timeMS).UTC())
	}
	if !strings.Contains(out, "width=128") || !strings.Contains(out, s.Event.ID) {
		t.Fatalf("ffprobe:\n%s", out)
	}
}

func TestRenderRejectsBadInput(t *testing.T) {
	var buf bytes.Buffer
	s := testSnapshot(1)
	s.Image.RGB = s.Image.RGB[:10]
	if err := Render(&buf, s, 80); err == nil || !strings.Contains(err.Error(), "image 128x64 with 10 bytes") {
		t.Fatalf("error %v", err)
	}
	s = testSnapshot(1)
	s.Maps.Epistemic = nil
	if err := Render(&buf, s, 80); err == nil || !strings.Contains(err.Error(), "epistemic map") {
		t.Fatalf("error %v", err)
	}
}

// dirBytes sums the .jpg files on disk.
func dirBytes(t *testing.T, dir string) (int64, int) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	files := 0
	for _, e := range ents {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".jpg") {
			n += info.Size()
			files++
		}
	}
	return n, files
}

// TestStoreNeverExceedsItsBudget puts 300 snapshots of random sizes (and
// replaces some) into a 64 KiB store: after every Put the files on disk
// stay within the budget, the newest is always there, and what goes first
// is the oldest.
func TestStoreNeverExceedsItsBudget(t *testing.T) {
	dir := t.TempDir()
	const budget = 64 << 10
	st, err := OpenStore(dir, budget)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var written []string
	for i := range 300 {
		id := fmt.Sprintf("front-z-%d-%d", 1000+i, i)
		if i%7 == 6 {
			id = written[len(written)-2] // a peak replaces an episode's snapshot
		}
		data := make([]byte, 1000+rng.IntN(15000))
		if err := st.Put(id, data); err != nil {
			t.Fatal(err)
		}
		written = append(written, id)
		disk, files := dirBytes(t, dir)
		if disk > budget || disk != st.Bytes() || files != st.Len() {
			t.Fatalf("put %d: %d bytes in %d files on disk, store says %d in %d; budget %d", i, disk, files, st.Bytes(), st.Len(), budget)
		}
		if b, err := st.Get(id); err != nil || len(b) != len(data) {
			t.Fatalf("put %d: the newest snapshot %s is gone: %v", i, id, err)
		}
	}
	// The survivors are the most recently written ids.
	n := st.Len()
	var recent []string
	seen := map[string]bool{}
	for i := len(written) - 1; i >= 0 && len(recent) < n; i-- {
		if !seen[written[i]] {
			seen[written[i]] = true
			recent = append(recent, written[i])
		}
	}
	for _, id := range recent {
		if _, err := st.Get(id); err != nil {
			t.Fatalf("recent snapshot %s was deleted before older ones: %v", id, err)
		}
	}
	if _, err := st.Get("front-z-1000-0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the oldest snapshot is still there: %v", err)
	}
	// Reopening with a smaller budget trims the oldest.
	st2, err := OpenStore(dir, 20<<10)
	if err != nil {
		t.Fatal(err)
	}
	if disk, _ := dirBytes(t, dir); disk > 20<<10 || disk != st2.Bytes() {
		t.Fatalf("after reopening: %d bytes on disk, store %d", disk, st2.Bytes())
	}
	if err := st2.Put("x", make([]byte, 21<<10)); err == nil {
		t.Fatal("a snapshot above the budget was accepted")
	}
	for _, bad := range []string{"../etc/passwd", "a/b", ""} {
		if err := st2.Put(bad, []byte{1}); err == nil {
			t.Fatalf("id %q accepted", bad)
		}
		if _, err := st2.Get(bad); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get %q: %v", bad, err)
		}
	}
}

// TestSinkNamesAndStoresTheEventsSnapshot runs an engine with the sink:
// the new event names the stored snapshot, whose EXIF time (read by
// ffprobe) is the event's frame time.
func TestSinkNamesAndStoresTheEventsSnapshot(t *testing.T) {
	store, err := OpenStore(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan alerts.Snapshot, 4)
	next := snapshotFunc(func(s *alerts.Snapshot) error { published <- *s; return nil })
	sink, err := NewSink(store, 85, nil, next)
	if err != nil {
		t.Fatal(err)
	}
	var events []alerts.Event
	rec := alerts.SinkFuncs{OnEvent: func(ev *alerts.Event) error { events = append(events, *ev); return nil }}
	cal := alerts.DefaultCalibration()
	zones := []alerts.Zone{{Name: "all", Polygon: [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}
	e, err := alerts.NewEngine(alerts.EngineSpec{Config: alerts.EngineConfig{Vehicle: "v", Camera: "front"},
		Zones: zones, Calibration: cal}, alerts.Sinks{sink, rec})
	if err != nil {
		t.Fatal(err)
	}
	s := testSnapshot(0)
	capture := time.UnixMilli(1_763_772_067_987)
	m := alerts.Maps{Width: 64, Height: 32, Epistemic: s.Maps.Epistemic, Scale: make([]float32, 64*32), Depth: make([]float32, 64*32)}
	for i := range m.Depth {
		m.Depth[i] = 20
	}
	if err := e.Observe(alerts.Frame{Seq: 9, Capture: capture, Image: &s.Image}, m); err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Snapshot == nil || events[0].Snapshot.Path != PathOf(events[0].ID) ||
		events[0].Snapshot.FrameSeq != 9 || events[0].Snapshot.TimeMS != capture.UnixMilli() {
		t.Fatalf("events %+v", events)
	}
	// The picture is rendered off the frame path and then handed on.
	var pub alerts.Snapshot
	select {
	case pub = <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("the rendered snapshot was never handed on")
	}
	sink.Close()
	if pub.Event.ID != events[0].ID || pub.Zone.Name != "all" || len(pub.JPEG) == 0 {
		t.Fatalf("handed on %+v", pub.Event)
	}
	b, err := store.Get(events[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, pub.JPEG) {
		t.Fatal("the stored snapshot differs from the published one")
	}
	if err := sink.Snapshot(&alerts.Snapshot{Event: &events[0]}); err == nil || sink.Skipped() != 1 {
		t.Fatalf("snapshot after Close: %v, skipped %d", err, sink.Skipped())
	}
	path := filepath.Join(t.TempDir(), "e.jpg")
	os.WriteFile(path, b, 0o644)
	if got, _ := ffprobeTime(t, path); !got.Equal(capture.Truncate(time.Millisecond).UTC()) {
		t.Fatalf("snapshot time %v, event frame time %v", got, capture)
	}
}

// BenchmarkRender640x192 renders one snapshot of the reference model's
// size (the cost added to an event that gets a snapshot).
func BenchmarkRender640x192(b *testing.B) {
	s := testSnapshot(1_763_772_067_412)
	s.Image = alerts.Image{Width: 640, Height: 192, RGB: make([]uint8, 640*192*3)}
	s.Maps = alerts.Maps{Width: 640, Height: 192, Epistemic: make([]float32, 640*192)}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		if err := Render(&buf, s, 80); err != nil {
			b.Fatal(err)
		}
	}
}

// snapshotFunc adapts a function to alerts.SnapshotSink.
type snapshotFunc func(*alerts.Snapshot) error

func (f snapshotFunc) Snapshot(s *alerts.Snapshot) error { return f(s) }

// FuzzStoreGet: ids come from HTTP paths; none may reach outside the
// store or panic, and only stored ids are found.
func FuzzStoreGet(f *testing.F) {
	for _, id := range []string{"front-a-1-1", "../x", "a/b", "", "..", "x.jpg", "front-a-1-1\x00"} {
		f.Add(id)
	}
	dir := f.TempDir()
	st, err := OpenStore(filepath.Join(dir, "store"), 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	if err := st.Put("front-a-1-1", []byte{1, 2, 3}); err != nil {
		f.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "secret.jpg"), []byte("secret"), 0o644)
	f.Fuzz(func(t *testing.T, id string) {
		b, err := st.Get(id)
		if id == "front-a-1-1" {
			if err != nil || len(b) != 3 {
				t.Fatalf("stored id: %v", err)
			}
			return
		}
		if err == nil {
			t.Fatalf("id %q found %q", id, b)
		}
	})
}
