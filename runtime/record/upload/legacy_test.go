package upload

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/objstore/s3test"
)

// queueLegacy puts src into the queue directory dir as item seq the way
// the queue did before CRC-64/NVME (its sidecar: sha256 of the file and
// part_md5, no CRCs), with uploadID as a multipart upload in progress.
// The sidecar is written from a map with the old field names, not from
// today's item type.
func queueLegacy(t *testing.T, dir string, seq uint64, src, key string, partSize int64, uploadID string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var md5s []string
	for off := int64(0); off < int64(len(b)) || off == 0; off += partSize {
		sum := md5.Sum(b[off:min(off+partSize, int64(len(b)))])
		md5s = append(md5s, hex.EncodeToString(sum[:]))
	}
	sha := sha256.Sum256(b)
	side := map[string]any{"seq": seq, "key": key, "size": len(b), "sha256": hex.EncodeToString(sha[:]), "part_md5": md5s,
		"part_size": partSize, "meta": identity, "queued_at": time.Now().UTC()}
	if uploadID != "" {
		side["upload_id"] = uploadID
	}
	j, err := json.Marshal(side)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.json", seq)), j, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(src, filepath.Join(dir, fmt.Sprintf("%020d.data", seq))); err != nil {
		t.Fatal(err)
	}
}

// TestLegacySidecarsUpload: items queued by the previous format (SHA-256
// and part MD5s, no CRCs) on a vehicle that is then upgraded still
// upload: a single-PUT file, and a 3-part file whose multipart upload the
// old uploader had started (part 1 sent with its Content-MD5 only). Each
// is checked against its old sums, upgraded to CRC-64/NVME and uploaded
// with it; the old upload is aborted. A legacy item whose file changed
// since it was queued fails that check: never stored, retried, still
// queued, its sidecar untouched.
func TestLegacySidecarsUpload(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "clips")
	c, err := objstore.New(srv.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	qdir := filepath.Join(dir, "queue")
	core := minio.Core{Client: c.Minio()}
	want := map[string][32]byte{}
	for i, n := range []int{1000, 2*MinPartSize + 777} {
		src := filepath.Join(dir, fmt.Sprintf("old-%d.mcap", i))
		key := "fleet/van-07/front/" + filepath.Base(src)
		want[key] = clip(t, src, n, uint64(40+i))
		id := ""
		if n > MinPartSize {
			// The old uploader's start: an upload without a checksum
			// algorithm, part 1 sent with Content-MD5.
			id, err = core.NewMultipartUpload(ctx, "clips", key, minio.PutObjectOptions{UserMetadata: identity})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(src)
			sum := md5.Sum(b[:MinPartSize])
			if _, err := core.PutObjectPart(ctx, "clips", key, id, 1, bytes.NewReader(b[:MinPartSize]), MinPartSize,
				minio.PutObjectPartOptions{Md5Base64: base64.StdEncoding.EncodeToString(sum[:])}); err != nil {
				t.Fatal(err)
			}
		}
		queueLegacy(t, qdir, uint64(i+1), src, key, MinPartSize, id)
	}
	var logs bytes.Buffer
	q, err := Open(Config{Dir: qdir, Target: "s3://clips/fleet", PartSize: MinPartSize}, c, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Queued != 2 {
		t.Fatalf("the legacy queue opened with %+v", st)
	}
	if err := q.Run(ctx, true); err != nil {
		t.Fatal(err)
	}
	got := objects(t, c, "clips", "fleet/")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("objects %v, want %v\n%s", keys(got), keys(want), logs.String())
	}
	checkCRCs(t, c, "clips", "fleet/")
	if n := strings.Count(logs.String(), "upgraded a queued item"); n != 2 {
		t.Errorf("%d items upgraded, want 2\n%s", n, logs.String())
	}
	uploads, err := core.ListMultipartUploads(ctx, "clips", "", "", "", "", 1000)
	if err != nil || len(uploads.Uploads) != 0 {
		t.Fatalf("multipart uploads left: %v %v", uploads.Uploads, err)
	}
	if ents, _ := os.ReadDir(qdir); len(ents) != 0 || q.Stats().Uploaded != 2 {
		t.Fatalf("%d files left in the queue, stats %+v", len(ents), q.Stats())
	}

	// A legacy item whose file changed after it was queued.
	qdir2 := filepath.Join(dir, "queue2")
	src := filepath.Join(dir, "old-changed.mcap")
	key := "fleet/van-07/front/old-changed.mcap"
	clip(t, src, 2*MinPartSize+5, 77)
	queueLegacy(t, qdir2, 7, src, key, MinPartSize, "")
	data := filepath.Join(qdir2, fmt.Sprintf("%020d.data", 7))
	b, _ := os.ReadFile(data)
	b[MinPartSize+3] ^= 0x01
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sidecar := filepath.Join(qdir2, fmt.Sprintf("%020d.json", 7))
	before, _ := os.ReadFile(sidecar)
	logs.Reset()
	q2, err := Open(Config{Dir: qdir2, Target: "s3://clips/fleet", PartSize: MinPartSize}, c, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if err := q2.Run(ctx2, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run returned %v, want it still retrying at the deadline", err)
	}
	if _, err := c.Stat(context.Background(), objstore.Location{Bucket: "clips", Key: key}); !objstore.IsNotFound(err) {
		t.Fatalf("%s: a changed legacy file was stored (stat: %v)\n%s", key, err, logs.String())
	}
	after, _ := os.ReadFile(sidecar)
	if st := q2.Stats(); st.Failures < 2 || st.Queued != 1 || !bytes.Equal(before, after) ||
		!strings.Contains(firstLine(logs.String(), "will retry"), "changed since it was queued") {
		t.Fatalf("stats %+v, sidecar changed %v, want failed attempts and the file queued as it was\n%s", st, !bytes.Equal(before, after), logs.String())
	}
}
