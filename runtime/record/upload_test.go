package record

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/objstore/s3test"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/record/upload"
)

// syncBuffer is a log sink safe for the recorder's goroutines.
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

// uploadRig is a recorder's upload target: a Versity Gateway with the
// bucket "fleet", and model, AuxUE and calibration files whose sha256 the
// uploaded objects must carry.
type uploadRig struct {
	srv    *s3test.Server
	client *objstore.Client
	ident  map[string]string // the didoedge.models metadata (RunIdentity)
	want   map[string]string // object metadata every clip must carry
}

func newUploadRig(t *testing.T) *uploadRig {
	t.Helper()
	srv := s3test.Start(t)
	srv.MakeBucket(t, "fleet")
	c, err := objstore.New(srv.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum := map[string]string{}
	files := map[string]string{}
	for _, n := range []string{"depth.onnx", "auxue.onnx", "calibration.yaml"} {
		p := filepath.Join(dir, n)
		data := []byte("the contents of " + n)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(data)
		files[n], sum[n] = p, hex.EncodeToString(h[:])
	}
	ident, err := RunIdentity(files["depth.onnx"], files["auxue.onnx"], []CameraFile{{Camera: "front", Calibration: files["calibration.yaml"]}})
	if err != nil {
		t.Fatal(err)
	}
	return &uploadRig{srv: srv, client: c, ident: ident, want: map[string]string{
		MetaVehicle: "van-07", MetaCamera: "front", MetaCameras: "front",
		MetaDepth: sum["depth.onnx"], MetaAuxUE: sum["auxue.onnx"], MetaCalibration: sum["calibration.yaml"]}}
}

// recorder starts an event-mode recorder uploading to s3://fleet/drives.
func (u *uploadRig) recorder(t *testing.T, dir string, log *syncBuffer, tweak func(*Config)) *Recorder {
	t.Helper()
	cfg := Config{Mode: ModeEvent, Dir: dir, PreRoll: time.Second, PostRoll: time.Second, Queue: 8,
		Maps: []string{MapEpistemic}, Compression: "lz4",
		Upload: &upload.Config{Target: "s3://fleet/drives"}}
	if tweak != nil {
		tweak(&cfg)
	}
	rec, err := New(cfg, Options{Streams: testStreams(t), Metadata: map[string]map[string]string{mcaprec.ModelsMetadata: u.ident},
		Vehicle: "van-07", UploadClient: u.client, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// clipSpan is a clip's expected frames: an episode open from frame open
// to frame end, at 15 fps with 1 s of pre- and post-roll.
type clipSpan struct{ open, end int }

func (c clipSpan) first() int { return c.open - 15 }
func (c clipSpan) last() int  { return c.end + 15 }

// recordClips feeds frames from..to and opens and ends the clips' episodes;
// after each clip's end plus the post-roll, hook(i) runs (i: the clip).
func recordClips(t *testing.T, rec *Recorder, s *synthFrame, t0 time.Time, from, to int, clips []clipSpan, hook func(i int)) {
	t.Helper()
	at := func(k int) time.Time { return t0.Add(time.Duration(float64(k) * float64(time.Second) / 15)) }
	for k := from; k <= to; k++ {
		if !rec.Frame(s.fill(k, t0, 15)) {
			t.Fatalf("frame %d dropped", k)
		}
		for i, c := range clips {
			switch k {
			case c.open:
				rec.EpisodeOpened(fmt.Sprintf("front-road-%d", i), at(k))
			case c.end:
				rec.EpisodeEnded(fmt.Sprintf("front-road-%d", i), at(k))
			case c.last() + 1: // this frame closed the clip
				waitIdle(t, rec)
				if hook != nil {
					hook(i)
				}
			}
		}
		waitIdle(t, rec)
	}
}

// bucketClips downloads every object under drives/: key -> the
// recording read back, and checks each object's metadata.
func (u *uploadRig) bucketClips(t *testing.T) map[string]*Recording {
	t.Helper()
	return u.bucketFiles(t, "-clip.mcap")
}

// bucketFiles is bucketClips for file names ending in suffix.
func (u *uploadRig) bucketFiles(t *testing.T, suffix string) map[string]*Recording {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	out := map[string]*Recording{}
	for o, err := range u.client.List(ctx, "fleet", "drives/", true) {
		if err != nil {
			t.Fatal(err)
		}
		data, err := u.client.ReadAll(ctx, objstore.Location{Bucket: "fleet", Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		info, err := u.client.Minio().StatObject(ctx, "fleet", o.Key, minio.StatObjectOptions{Checksum: true})
		if err != nil {
			t.Fatal(err)
		}
		meta := map[string]string{}
		for k, v := range info.UserMetadata {
			meta[strings.ToLower(k)] = v
		}
		for k, v := range u.want {
			if meta[k] != v {
				t.Errorf("%s: metadata %s = %q, want %q (all: %v)", o.Key, k, meta[k], v, meta)
			}
		}
		// The content's checksum is S3's own (the queue sent it and the
		// server checked it), computed here by minio-go independently.
		if want := minio.ChecksumCRC64NVME.ChecksumBytes(data).Encoded(); info.ChecksumCRC64NVME != want {
			t.Errorf("%s: stored crc64nvme %q is not the content's %s", o.Key, info.ChecksumCRC64NVME, want)
		}
		if !strings.HasPrefix(o.Key, "drives/van-07/front/rec-") || !strings.HasSuffix(o.Key, suffix) {
			t.Errorf("key %s, want drives/van-07/front/rec-*%s", o.Key, suffix)
		}
		p := filepath.Join(dir, filepath.Base(o.Key))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := ReadRecording(p, "front")
		if err != nil {
			t.Fatalf("%s: %v", o.Key, err)
		}
		if r.Truncated || r.Models[IdentityCameras] != "front" || r.Models["depth_sha256"] != u.want[MetaDepth] {
			t.Errorf("%s: truncated %v, models %v", o.Key, r.Truncated, r.Models)
		}
		out[o.Key] = r
	}
	return out
}

// checkClips requires exactly the clips' frame ranges in the bucket: none
// lost, none twice.
func checkClips(t *testing.T, got map[string]*Recording, clips []clipSpan) {
	t.Helper()
	var spans, want []string
	for _, r := range got {
		spans = append(spans, fmt.Sprintf("%d..%d/%d", r.FirstSeq, r.LastSeq, r.Frames))
	}
	for _, c := range clips {
		want = append(want, fmt.Sprintf("%d..%d/%d", c.first(), c.last(), c.last()-c.first()+1))
	}
	slices.Sort(spans)
	slices.Sort(want)
	if !slices.Equal(spans, want) {
		t.Fatalf("the bucket holds clips %v, want exactly %v", spans, want)
	}
}

// localLeft lists what is left on the vehicle: recordings in dir and
// files in the queue.
func localLeft(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, d := range []string{dir, filepath.Join(dir, DefaultUploadDir)} {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				out = append(out, filepath.Join(filepath.Base(d), e.Name()))
			}
		}
	}
	return out
}

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEventClipsUpload: an event-mode recorder with record.upload hands
// each clip to the queue when it closes; the uploader (RunUploads, as the
// pipeline runs it) puts it at drives/<vehicle>/<camera>/<file> with the
// vehicle, camera, model, AuxUE and calibration sha256 as metadata; the
// local files are gone once verified.
func TestEventClipsUpload(t *testing.T) {
	u := newUploadRig(t)
	dir := t.TempDir()
	var log syncBuffer
	rec := u.recorder(t, dir, &log, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- rec.RunUploads(ctx) }()
	clips := []clipSpan{{40, 60}, {150, 160}, {260, 262}}
	recordClips(t, rec, newSynth("front", 32, 16, 16, 8), time.Unix(1_800_000_000, 0), 1, 300, clips, nil)
	closeRec(t, rec)
	q := rec.Uploads()
	waitUntil(t, 30*time.Second, "3 clips uploaded", func() bool { return q.Stats().Uploaded == 3 })
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("RunUploads: %v", err)
	}
	checkClips(t, u.bucketClips(t), clips)
	if left := localLeft(t, dir); len(left) != 0 {
		t.Fatalf("left on the vehicle after verified uploads: %v", left)
	}
	st, qs := rec.Stats(), q.Stats()
	if st.Clips != 3 || st.UploadQueued != 3 || st.UploadWaiting != 0 || st.UploadDiscarded != 0 || qs.Queued != 0 || qs.Failures != 0 {
		t.Fatalf("recorder %+v, queue %+v", st, qs)
	}
}

// TestEventClipsUploadOutage: the storage server goes away after the
// first clip is uploaded and comes back 2 s later; clips closed meanwhile
// wait in the queue and the uploader retries. Every clip ends up in the
// bucket exactly once (none lost, none twice), no multipart upload is
// left, and nothing stays on the vehicle.
func TestEventClipsUploadOutage(t *testing.T) {
	u := newUploadRig(t)
	dir := t.TempDir()
	var log syncBuffer
	rec := u.recorder(t, dir, &log, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- rec.RunUploads(ctx) }()
	q := rec.Uploads()
	clips := []clipSpan{{40, 50}, {100, 110}, {160, 170}, {220, 230}}
	var down time.Time
	recordClips(t, rec, newSynth("front", 32, 16, 16, 8), time.Unix(1_800_000_000, 0), 1, 260, clips, func(i int) {
		switch i {
		case 0:
			waitUntil(t, 30*time.Second, "the first clip uploaded", func() bool { return q.Stats().Uploaded == 1 })
			u.srv.Stop()
			down = time.Now()
		case 2:
			waitUntil(t, 30*time.Second, "two clips queued during the outage", func() bool { return q.Stats().Queued == 2 })
			time.Sleep(time.Until(down.Add(2 * time.Second)))
			if st := q.Stats(); st.Uploaded != 1 || st.Queued != 2 {
				t.Fatalf("during the outage: %+v, want 1 uploaded before it and 2 waiting", st)
			}
			if err := u.srv.Restart(); err != nil {
				t.Fatal(err)
			}
		}
	})
	closeRec(t, rec)
	waitUntil(t, 60*time.Second, "4 clips uploaded after the outage", func() bool { return q.Stats().Uploaded == 4 })
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("RunUploads: %v", err)
	}
	checkClips(t, u.bucketClips(t), clips)
	uploads, err := minio.Core{Client: u.client.Minio()}.ListMultipartUploads(context.Background(), "fleet", "", "", "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(uploads.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left on the server", len(uploads.Uploads))
	}
	if left := localLeft(t, dir); len(left) != 0 {
		t.Fatalf("left on the vehicle: %v", left)
	}
	// minio-go retries each request a few times before the queue sees a
	// failure: a 2 s outage may end within them.
	t.Logf("queue after a 2 s outage: %+v", q.Stats())
}

// TestUploadBudgets: continuous recording while nothing uploads (the
// storage unreachable for days, shortened): the queue fills to
// upload.max_bytes, then rotated files wait in record.dir, where
// budget_bytes deletes the oldest. Every closed file is accounted for:
// queued, deleted before upload (counted and logged), or still waiting;
// a refusal is counted once per file, not once per retry. A new process
// on the same directories offers the waiting files (reading their models
// from the files) as uploads free room: every file not deleted reaches
// the bucket, with its metadata, and nothing stays on the vehicle.
func TestUploadBudgets(t *testing.T) {
	u := newUploadRig(t)
	dir := t.TempDir()
	var log syncBuffer
	continuous := func(c *Config) {
		c.Mode, c.ChunkBytes, c.RotateBytes, c.BudgetBytes = ModeContinuous, 64<<10, 256<<10, 1<<20
		c.Maps, c.FrameFormat = []string{MapDepth, MapScale, MapEpistemic}, "png"
		c.Upload.MaxBytes = 512 << 10
	}
	rec := u.recorder(t, dir, &log, continuous)
	s := newSynth("front", 160, 120, 80, 60)
	t0 := time.Unix(1_800_000_000, 0)
	var dirMax int64
	for k := 1; k <= 1000; k++ {
		if !rec.Frame(s.fill(k, t0, 15)) {
			t.Fatalf("frame %d dropped", k)
		}
		waitIdle(t, rec)
		recs, _ := listRecordings(dir)
		var total int64
		for _, r := range recs {
			total += r.size
		}
		dirMax = max(dirMax, total)
	}
	closeRec(t, rec)
	st, qs := rec.Stats(), rec.Uploads().Stats()
	waiting, _ := listRecordings(dir)
	t.Logf("recorder %+v\nqueue %+v\n%d waiting, record.dir at most %d bytes", st, qs, len(waiting), dirMax)
	if st.FilesClosed < 8 || st.UploadDiscarded == 0 || qs.Queued == 0 || len(waiting) == 0 {
		t.Fatalf("the test did not fill both budgets: recorder %+v, queue %+v, %d waiting", st, qs, len(waiting))
	}
	if got := st.UploadQueued + st.UploadDiscarded + uint64(len(waiting)); got != st.FilesClosed || st.UploadWaiting != int64(len(waiting)) {
		t.Fatalf("%d files closed, but %d queued + %d deleted + %d waiting (the recorder counts %d waiting)",
			st.FilesClosed, st.UploadQueued, st.UploadDiscarded, len(waiting), st.UploadWaiting)
	}
	if st.FilesDeleted != st.UploadDiscarded || strings.Count(log.String(), "recording deleted before its upload") != int(st.UploadDiscarded) {
		t.Fatalf("deletions before upload: %d counted, %d deleted, %d logged", st.UploadDiscarded, st.FilesDeleted,
			strings.Count(log.String(), "recording deleted before its upload"))
	}
	if qs.QueuedBytes > 512<<10 || dirMax > 1<<20+256<<10 {
		t.Fatalf("budgets exceeded: queue %d of %d bytes, record.dir up to %d of %d (+ one file)", qs.QueuedBytes, 512<<10, dirMax, 1<<20)
	}
	refusals := strings.Count(log.String(), "upload queue full")
	if qs.Refused == 0 || qs.Refused != int64(refusals) || qs.Refused > int64(st.FilesClosed-st.UploadQueued) {
		t.Fatalf("%d refusals counted, %d logged, for %d files not queued: one per file, not per retry", qs.Refused, refusals, st.FilesClosed-st.UploadQueued)
	}

	// The next start: the waiting files are leftovers of that process.
	rec2 := u.recorder(t, dir, &log, continuous)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- rec2.RunUploads(ctx) }()
	want := int64(st.FilesClosed - st.UploadDiscarded)
	q2 := rec2.Uploads()
	waitUntil(t, 60*time.Second, fmt.Sprintf("%d files uploaded", want), func() bool { return q2.Stats().Uploaded == want })
	closeRec(t, rec2)
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	got := u.bucketFiles(t, ".mcap")
	if int64(len(got)) != want {
		t.Fatalf("%d objects, want %d", len(got), want)
	}
	var frames int
	for _, r := range got {
		frames += r.Frames
	}
	t.Logf("%d files with %d frames uploaded; %d frames lost to budget_bytes while the storage was away", len(got), frames, int(st.FramesWritten)-frames)
	if left := localLeft(t, dir); len(left) != 0 {
		t.Fatalf("left on the vehicle: %v", left)
	}
}
