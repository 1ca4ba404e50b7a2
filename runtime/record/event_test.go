package record

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/mcapcheck"
)

// TestEventClips: a clip holds the pre-roll before the episode opened and
// the post-roll after the last episode ended, exactly by capture time;
// overlapping episodes share one clip; a later episode gets its own.
func TestEventClips(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Mode: ModeEvent, Dir: dir, PreRoll: time.Second, PostRoll: time.Second, Queue: 8,
		Maps: []string{MapEpistemic}, Compression: "lz4"}
	rec, err := New(cfg, Options{Streams: testStreams(t)})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	s := newSynth("front", 32, 16, 16, 8)
	at := func(k int) time.Time { return t0.Add(time.Duration(float64(k) * float64(time.Second) / 15)) }
	for k := 1; k <= 200; k++ {
		f := s.fill(k, t0, 15)
		if !rec.Frame(f) {
			t.Fatalf("frame %d dropped", k)
		}
		switch k {
		case 40: // t40 - 1s = t25: frames 25.. are in the clip
			rec.EpisodeOpened("front-road-1-1", at(40))
			rec.JSON("front", "events", at(40), eventJSON(1, "front", 40, at(40)))
		case 50:
			rec.EpisodeOpened("front-left-1-2", at(50)) // overlaps: same clip
		case 55:
			rec.EpisodeEnded("front-road-1-1", at(55))
		case 60: // the last one ends: post-roll to t60 + 1s = t75
			rec.EpisodeEnded("front-left-1-2", at(60))
		case 150: // a second clip: frames 135..165
			rec.EpisodeOpened("front-road-1-3", at(150))
		case 151:
			rec.EpisodeUpdated("front-road-1-3", at(151))
		case 160:
			rec.EpisodeEnded("front-road-1-3", at(150+10))
		}
		waitIdle(t, rec)
	}
	closeRec(t, rec)
	st := rec.Stats()
	if st.Clips != 2 || st.FilesClosed != 2 || st.FramesDropped != 0 || st.FramesWritten != 51+41 {
		t.Fatalf("stats %+v", st)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "rec-*-clip.mcap"))
	slices.Sort(files)
	if len(files) != 2 {
		t.Fatalf("clips %v", files)
	}
	for i, want := range []struct {
		first, last int
		events      int
		episodes    string
	}{{25, 75, 1, "front-road-1-1,front-left-1-2"}, {135, 175, 0, "front-road-1-3"}} {
		rep := mcapcheck.Check(t, files[i])
		seqs := rep.Sequences["/front/image"]
		if len(seqs) == 0 || int(seqs[0]) != want.first || int(seqs[len(seqs)-1]) != want.last || len(seqs) != want.last-want.first+1 {
			t.Errorf("clip %d: frames %v, want %d..%d", i, seqs, want.first, want.last)
		}
		if rep.Counts["/front/epistemic"] != len(seqs) || rep.Counts["/front/depth"] != 0 {
			t.Errorf("clip %d: counts %v", i, rep.Counts)
		}
		if rep.Counts["/front/events"] != want.events {
			t.Errorf("clip %d: %d events, want %d", i, rep.Counts["/front/events"], want.events)
		}
		got := ""
		for _, m := range rep.Metadata {
			if m.Name == "didoedge.episodes" {
				got = m.Metadata["ids"]
			}
		}
		if got != want.episodes {
			t.Errorf("clip %d: episodes %q, want %q", i, got, want.episodes)
		}
	}
}

// TestRingBound: with a ring smaller than the pre-roll, the clip starts
// later and the ring's live bytes never exceed ring_bytes.
func TestRingBound(t *testing.T) {
	// Sizes of Go's allocation classes, so that buffer capacity = length.
	r := ring{preRoll: uint64(10 * time.Second), limit: 10 * (1024 + 128)}
	msg := make([]byte, 1024)
	for k := range 100 {
		r.push(0, uint64(k)*1e6, uint32(k), msg)
		r.push(1, uint64(k)*1e6, uint32(k), msg[:128])
		if r.live > r.limit {
			t.Fatalf("push %d: live %d > limit %d", k, r.live, r.limit)
		}
	}
	refs := r.since(0, nil)
	// Ten pairs fill the ring exactly: seqs 90..99 of both channels.
	if len(refs) != 20 || refs[0].e.seq != 90 || refs[len(refs)-1].e.seq != 99 {
		t.Fatalf("ring holds %d messages from seq %d", len(refs), refs[0].e.seq)
	}
	// Warm ring: pushing one for one allocates nothing.
	if a := testing.AllocsPerRun(100, func() { r.push(0, r.newest+1, 0, msg); r.push(1, r.newest, 0, msg[:128]) }); a != 0 {
		t.Fatalf("warm ring allocates %v per push pair", a)
	}
}
