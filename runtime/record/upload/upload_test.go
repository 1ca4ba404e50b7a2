package upload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/objstore/s3test"
)

var identity = map[string]string{"vehicle": "van-07", "camera": "front", "model": "sha256:abc", "calibration": "sha256:def"}

// clip writes a file of n pseudo-random bytes and returns its SHA-256.
func clip(t testing.TB, path string, n int, seed uint64) [32]byte {
	t.Helper()
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// objects reads every object under prefix: key -> SHA-256 of the content.
func objects(t *testing.T, c *objstore.Client, bucket, prefix string) map[string][32]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][32]byte{}
	for o, err := range c.List(ctx, bucket, prefix, true) {
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.ReadAll(ctx, objstore.Location{Bucket: bucket, Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = sha256.Sum256(b)
	}
	return out
}

// TestQueueUploads: a small file (one PUT), one of exactly one part and
// one of three parts reach the bucket with their content and identities,
// the local files go only after verification, a file over the byte budget
// is refused and left in place, and bad settings name their key.
func TestQueueUploads(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "clips")
	c, err := objstore.New(srv.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	q, err := Open(Config{Dir: filepath.Join(dir, "queue"), Target: "s3://clips/fleet", PartSize: MinPartSize, MaxBytes: 17 << 20}, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][32]byte{}
	t0 := time.Now()
	for i, n := range []int{1000, MinPartSize, 2*MinPartSize + 12345} {
		src := filepath.Join(dir, fmt.Sprintf("clip-%d.mcap", i))
		want["fleet/van-07/front/"+filepath.Base(src)] = clip(t, src, n, uint64(i))
		if err := q.Enqueue(src, identity); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(src); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still at its place after Enqueue: %v", src, err)
		}
	}
	big := filepath.Join(dir, "big.mcap")
	clip(t, big, 2<<20, 9)
	if err := q.Enqueue(big, identity); !errors.Is(err, ErrBudget) {
		t.Fatalf("over the budget: %v", err)
	}
	if _, err := os.Stat(big); err != nil {
		t.Fatalf("a refused file must stay: %v", err)
	}
	st := q.Stats()
	if st.Queued != 3 || st.Refused != 1 || st.Oldest.Before(t0) || st.Oldest.After(time.Now()) {
		t.Fatalf("stats %+v (queued from %v)", st, t0)
	}
	// The queue time is in the sidecar: a restart keeps the age.
	if q2, err := Open(q.Config(), nil, nil); err != nil || !q2.Stats().Oldest.Equal(st.Oldest) {
		t.Fatalf("reopened: %v, oldest %v, want %v", err, q2.Stats().Oldest, st.Oldest)
	}
	queuedBytes := float64(1000 + MinPartSize + 2*MinPartSize + 12345)
	scrape := func() time.Time { return st.Oldest.Add(90 * time.Second) }
	checkMetrics(t, Collectors(q.Stats, scrape), map[string]float64{
		"didoedge_upload_queued_files": 3, "didoedge_upload_queued_bytes": queuedBytes,
		"didoedge_upload_oldest_queued_age_seconds": 90, "didoedge_upload_refused_total": 1,
		"didoedge_upload_uploaded_files_total": 0, "didoedge_upload_failed_attempts_total": 0,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := q.Run(ctx, true); err != nil {
		t.Fatal(err)
	}
	got := objects(t, c, "clips", "fleet/")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("objects %v, want %v", keys(got), keys(want))
	}
	info, err := c.Stat(ctx, objstore.Location{Bucket: "clips", Key: "fleet/van-07/front/clip-2.mcap"})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range identity {
		if info.UserMetadata[strings.ToUpper(k[:1])+k[1:]] != v {
			t.Errorf("metadata %s: %v", k, info.UserMetadata)
		}
	}
	if !strings.HasSuffix(strings.Trim(info.ETag, `"`), "-3") {
		t.Errorf("a 3-part file's ETag %s", info.ETag)
	}
	checkCRCs(t, c, "clips", "fleet/")
	ents, _ := os.ReadDir(filepath.Join(dir, "queue"))
	if st := q.Stats(); len(ents) != 0 || st.Queued != 0 || st.Uploaded != 3 || st.UploadedBytes != int64(1000+MinPartSize+2*MinPartSize+12345) {
		t.Fatalf("after the upload: %d files in the queue, stats %+v", len(ents), st)
	}
	checkMetrics(t, Collectors(q.Stats, scrape), map[string]float64{
		"didoedge_upload_queued_files": 0, "didoedge_upload_queued_bytes": 0, "didoedge_upload_oldest_queued_age_seconds": 0,
		"didoedge_upload_uploaded_files_total": 3, "didoedge_upload_uploaded_bytes_total": queuedBytes,
		"didoedge_upload_refused_total": 1, "didoedge_upload_failed_attempts_total": 0,
	})
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Target: "s3://bkt/p"}, "upload.dir"},
		{Config{Dir: "q", Target: "/local"}, "upload.target"},
		{Config{Dir: "q", Target: "s3://bkt/p", PartSize: 1 << 20}, "upload.part_size"},
		{Config{Dir: "q", Target: "s3://bkt/p", MaxBytes: -1}, "upload.max_bytes"},
	} {
		if err := tc.cfg.WithDefaults().Validate("upload"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %s", tc.cfg, err, tc.want)
		}
	}
}

// checkCRCs: every object under prefix has, as its stored full-object
// checksum (HEAD with checksum mode), the CRC-64/NVME of its content as
// minio-go's own implementation computes it.
func checkCRCs(t *testing.T, c *objstore.Client, bucket, prefix string) {
	t.Helper()
	ctx := context.Background()
	for o, err := range c.List(ctx, bucket, prefix, true) {
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.ReadAll(ctx, objstore.Location{Bucket: bucket, Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Minio().StatObject(ctx, bucket, o.Key, minio.StatObjectOptions{Checksum: true})
		if err != nil {
			t.Fatal(err)
		}
		if want := minio.ChecksumCRC64NVME.ChecksumBytes(b).Encoded(); info.ChecksumCRC64NVME != want || info.ChecksumMode != "FULL_OBJECT" {
			t.Errorf("%s: stored checksum crc64nvme %q (%s), want %s FULL_OBJECT", o.Key, info.ChecksumCRC64NVME, info.ChecksumMode, want)
		}
	}
}

func keys(m map[string][32]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestHelperUploader is the uploader process of TestQueueSurvivesKillsAndOutage.
func TestHelperUploader(t *testing.T) {
	dir := os.Getenv("DIDOEDGE_UPLOAD_QUEUE")
	if dir == "" {
		return
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	home, _ := os.UserHomeDir()
	cfg, err := objstore.ConfigFromEnv(os.Getenv, home)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := objstore.New(cfg, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	q, err := Open(Config{Dir: dir, Target: "s3://clips/fleet", PartSize: MinPartSize, RateLimit: 16 << 20}, c, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := q.Run(context.Background(), true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "drained: %+v\n", q.Stats())
	os.Exit(0)
}

// TestQueueSurvivesKillsAndOutage: 8 clips (4 of 3 parts, 4 single) are
// queued; the uploader process is SIGKILLed 10 times at random moments,
// and the storage server is stopped for an outage (3 s; set
// DIDOEDGE_UPLOAD_OUTAGE=60s for the goal's minute) while an uploader
// runs. Then an uploader drains the queue: every clip is in the bucket
// once, with its content, nothing else is (no duplicate, no leftover
// multipart upload), and the local queue is empty. At least one multipart
// upload was resumed from parts already on the server.
func TestQueueSurvivesKillsAndOutage(t *testing.T) {
	outage := 3 * time.Second
	if s := os.Getenv("DIDOEDGE_UPLOAD_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("DIDOEDGE_UPLOAD_OUTAGE=%q: %v", s, err)
		}
		outage = d
	}
	srv := s3test.Start(t)
	srv.MakeBucket(t, "clips")
	c, err := objstore.New(srv.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	qdir := filepath.Join(dir, "queue")
	q, err := Open(Config{Dir: qdir, Target: "s3://clips/fleet", PartSize: MinPartSize}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][32]byte{}
	for i := range 8 {
		n := 300 << 10
		if i%2 == 0 {
			n = 2*MinPartSize + 1<<20
		}
		src := filepath.Join(dir, fmt.Sprintf("event-%02d.mcap", i))
		want["fleet/van-07/front/"+filepath.Base(src)] = clip(t, src, n, uint64(100+i))
		if err := q.Enqueue(src, identity); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperUploader$")
		cmd.Env = append(append(os.Environ(), "DIDOEDGE_UPLOAD_QUEUE="+qdir, "HOME="+dir), srv.Env()...)
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	r := rand.New(rand.NewPCG(42, 1))
	for k := range 10 {
		cmd := start()
		if k == 5 {
			// The outage: the server goes away under a running uploader,
			// which retries; it is killed while the server is down.
			time.Sleep(200 * time.Millisecond)
			srv.Stop()
			time.Sleep(outage)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		time.Sleep(time.Duration(150+r.IntN(500)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	cmd := start()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("final uploader: %v\n%s", err, logs.String())
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("final uploader did not drain the queue in 2 min\n%s", logs.String())
	}
	got := objects(t, c, "clips", "")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bucket holds %v, want exactly %v\n%s", keys(got), keys(want), logs.String())
	}
	checkCRCs(t, c, "clips", "")
	ents, _ := os.ReadDir(qdir)
	if len(ents) != 0 {
		t.Fatalf("%d files left in the queue", len(ents))
	}
	uploads, err := minio.Core{Client: c.Minio()}.ListMultipartUploads(context.Background(), "clips", "", "", "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(uploads.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left on the server", len(uploads.Uploads))
	}
	resumed := 0
	for _, m := range regexp.MustCompile(`upload: resuming.*parts_kept=(\d+)`).FindAllStringSubmatch(logs.String(), -1) {
		if n, _ := strconv.Atoi(m[1]); n > 0 {
			resumed++
		}
	}
	retried := strings.Count(logs.String(), "upload: will retry")
	t.Logf("8 clips uploaded across 10 SIGKILLs and a %v outage: %d resumes kept parts already on the server (their CRC64NVME equal), %d retried attempts", outage, resumed, retried)
	if resumed == 0 || retried == 0 {
		t.Fatalf("the test did not exercise a resume (%d) or a retry (%d)\n%s", resumed, retried, logs.String())
	}
}

// TestChangedFileNeverUploads: a queued file that changes on disk after
// Enqueue (one byte flipped: bit rot, a stray writer) is never stored as
// the object. The uploader sends the CRC-64/NVME Enqueue computed as the
// request's x-amz-checksum-crc64nvme (of the single PUT, or of each part)
// and does not hash the bytes again, so it is the server that must refuse
// them: the object never exists, the attempts fail and are retried, and
// the file stays queued.
func TestChangedFileNeverUploads(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "clips")
	c, err := objstore.New(srv.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		size, flip int
	}{
		{"single PUT", 1000, 500},
		{"second of 3 parts", 2*MinPartSize + 100, MinPartSize + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var logs bytes.Buffer
			q, err := Open(Config{Dir: filepath.Join(dir, "queue"), Target: "s3://clips/fleet", PartSize: MinPartSize}, c,
				slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(dir, "changed-"+strings.ReplaceAll(tc.name, " ", "-")+".mcap")
			clip(t, src, tc.size, 5)
			if err := q.Enqueue(src, identity); err != nil {
				t.Fatal(err)
			}
			data := q.dataPath(q.seq)
			b, err := os.ReadFile(data)
			if err != nil {
				t.Fatal(err)
			}
			b[tc.flip] ^= 0x40
			if err := os.WriteFile(data, b, 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := q.Run(ctx, true); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Run returned %v, want it still retrying at the deadline", err)
			}
			key := "fleet/van-07/front/" + filepath.Base(src)
			if _, err := c.Stat(context.Background(), objstore.Location{Bucket: "clips", Key: key}); !objstore.IsNotFound(err) {
				t.Fatalf("%s: the server stored a changed file (stat: %v)\n%s", key, err, logs.String())
			}
			st := q.Stats()
			if st.Failures < 2 || st.Queued != 1 || st.Uploaded != 0 {
				t.Fatalf("stats %+v, want failed attempts and the file still queued\n%s", st, logs.String())
			}
			if _, err := os.Stat(data); err != nil {
				t.Fatalf("the queued file is gone: %v", err)
			}
			// Refused for its checksum, not for something else.
			if first := firstLine(logs.String(), "will retry"); !strings.Contains(first, "CRC64NVME you specified did not match") {
				t.Fatalf("first failure %q, want the server's CRC64NVME refusal\n%s", first, logs.String())
			}
			t.Logf("%d failed attempts; first: %s", st.Failures, firstLine(logs.String(), "will retry"))
		})
	}
}

func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// checkMetrics gathers cs through a client_golang registry (as a scrape
// would) and compares the named values.
func checkMetrics(t *testing.T, cs []prometheus.Collector, want map[string]float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cs...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			got[mf.GetName()] = m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			got[mf.GetName()] = m.GetCounter().GetValue()
		}
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("metric %s = %v (present %v), want %v", name, g, ok, v)
		}
	}
}
