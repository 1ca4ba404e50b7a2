package upload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/didoedge/didoedge/internal/objstore"
)

// Backoff of a failed attempt: doubling from minBackoff up to maxBackoff,
// with jitter.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// Run uploads the queue, oldest first, until ctx ends; with drain it
// returns nil once the queue is empty. Failures (the server unreachable,
// a verification mismatch) are retried with backoff for as long as it
// takes: items never leave the queue unverified.
func (q *Queue) Run(ctx context.Context, drain bool) error {
	if q.client == nil {
		return errors.New("upload queue: no object storage client")
	}
	backoff := minBackoff
	for {
		items, err := q.scan()
		if err != nil {
			return err
		}
		if len(items) == 0 {
			if drain {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-q.wake:
			case <-time.After(5 * time.Second):
			}
			continue
		}
		for _, it := range items {
			err := q.upload(ctx, it)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				q.failures.Add(1)
				q.log.Warn("upload: will retry", "key", it.Key, "in", backoff, "err", err)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(backoff + time.Duration(rand.Int64N(int64(backoff/4)+1))):
				}
				backoff = min(2*backoff, maxBackoff)
				break
			}
			backoff = minBackoff
			if err := q.remove(it); err != nil {
				return err
			}
		}
	}
}

// remove deletes an uploaded and verified item: data first, then the
// sidecar (a sidecar left alone is cleaned up by the next Open or scan).
func (q *Queue) remove(it *item) error {
	if err := os.Remove(q.dataPath(it.Seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("upload queue: %w", err)
	}
	os.Remove(q.sidecarPath(it.Seq))
	q.mu.Lock()
	q.bytes -= it.Size
	q.count--
	delete(q.since, it.Seq)
	q.mu.Unlock()
	select {
	case q.freed <- struct{}{}:
	default:
	}
	q.uploaded.Add(1)
	q.uploadedBytes.Add(it.Size)
	q.log.Info("uploaded", "key", it.Key, "bytes", it.Size)
	return nil
}

func (q *Queue) core() minio.Core { return minio.Core{Client: q.client.Minio()} }

// errMismatch marks an object that exists but is not the item's.
var errMismatch = errors.New("object differs from the queued file")

// verify checks the object against the item: size, SHA-256 metadata and
// the ETag computed locally.
func (q *Queue) verify(ctx context.Context, it *item) error {
	info, err := q.client.Stat(ctx, objstore.Location{Bucket: q.loc.Bucket, Key: it.Key})
	if err != nil {
		return err
	}
	etag := strings.Trim(info.ETag, `"`)
	sha := info.UserMetadata["Sha256"]
	if sha == "" {
		sha = info.Metadata.Get("X-Amz-Meta-Sha256")
	}
	switch {
	case info.Size != it.Size:
		return fmt.Errorf("verify %s: size %d, want %d: %w", it.Key, info.Size, it.Size, errMismatch)
	case sha != it.SHA256:
		return fmt.Errorf("verify %s: sha256 metadata %q, want %s: %w", it.Key, sha, it.SHA256, errMismatch)
	case etag != it.etag():
		return fmt.Errorf("verify %s: ETag %s, want %s: %w", it.Key, etag, it.etag(), errMismatch)
	}
	return nil
}

func (it *item) putOptions() minio.PutObjectOptions {
	meta := map[string]string{"sha256": it.SHA256}
	for k, v := range it.Meta {
		meta[k] = v
	}
	return minio.PutObjectOptions{UserMetadata: meta, ContentType: "application/octet-stream"}
}

// upload sends one item and verifies it.
func (q *Queue) upload(ctx context.Context, it *item) error {
	// Already complete (a crash after the upload, before the delete)?
	if err := q.verify(ctx, it); err == nil {
		q.already.Add(1)
		return nil
	} else if !objstore.IsNotFound(err) && !errors.Is(err, errMismatch) {
		return err // the server unreachable: retry later
	}
	f, err := os.Open(q.dataPath(it.Seq))
	if err != nil {
		return fmt.Errorf("upload queue: %w", err)
	}
	defer f.Close()
	if !it.multipart() {
		// The payload's MD5 (Content-MD5) and SHA-256 (the signed
		// X-Amz-Content-Sha256) are the ones computed at Enqueue: the
		// server checks the body against both. Left to itself, minio-go
		// would sign over plain HTTP with a streaming signature that
		// hashes every 64 KiB chunk with SHA-256 a second time.
		md5b, _ := hex.DecodeString(it.PartMD5[0])
		opts := it.putOptions()
		opts.DisableContentSha256 = true
		if _, err := q.core().PutObject(ctx, q.loc.Bucket, it.Key, q.limit(ctx, f), it.Size,
			base64.StdEncoding.EncodeToString(md5b), it.SHA256, opts); err != nil {
			return fmt.Errorf("put %s: %w", it.Key, err)
		}
		return q.verify(ctx, it)
	}
	return q.multipart(ctx, it, f)
}

func (q *Queue) multipart(ctx context.Context, it *item, f *os.File) error {
	c := q.core()
	have := map[int]string{}
	if it.UploadID != "" {
		// Resume: the parts the server holds, at most MaxParts of them
		// (one page of 1000 at a time).
		marker := 0
		for {
			res, err := c.ListObjectParts(ctx, q.loc.Bucket, it.Key, it.UploadID, marker, 1000)
			if err != nil {
				if minio.ToErrorResponse(err).Code == "NoSuchUpload" {
					// Aborted or expired on the server: start again.
					it.UploadID = ""
					if werr := q.writeSidecar(it); werr != nil {
						return werr
					}
					return fmt.Errorf("resume %s: upload gone, starting again: %w", it.Key, err)
				}
				return fmt.Errorf("resume %s: %w", it.Key, err)
			}
			for _, p := range res.ObjectParts {
				have[p.PartNumber] = strings.Trim(p.ETag, `"`)
			}
			if !res.IsTruncated {
				break
			}
			marker = res.NextPartNumberMarker
		}
		q.log.Info("upload: resuming", "key", it.Key, "parts_on_server", len(have), "parts", len(it.PartMD5))
	} else {
		// Abort what an earlier process started for this key but did not
		// record (killed between the two): no orphan parts stay behind.
		res, err := c.ListMultipartUploads(ctx, q.loc.Bucket, it.Key, "", "", "", 1000)
		if err != nil {
			return fmt.Errorf("list uploads of %s: %w", it.Key, err)
		}
		for _, u := range res.Uploads {
			if u.Key == it.Key {
				if err := c.AbortMultipartUpload(ctx, q.loc.Bucket, it.Key, u.UploadID); err != nil {
					return fmt.Errorf("abort a stale upload of %s: %w", it.Key, err)
				}
			}
		}
		id, err := c.NewMultipartUpload(ctx, q.loc.Bucket, it.Key, it.putOptions())
		if err != nil {
			return fmt.Errorf("start upload of %s: %w", it.Key, err)
		}
		it.UploadID = id
		if err := q.writeSidecar(it); err != nil {
			return err
		}
	}
	parts := make([]minio.CompletePart, len(it.PartMD5))
	buf := make([]byte, it.PartSize)
	for i, sum := range it.PartMD5 {
		n := i + 1
		parts[i] = minio.CompletePart{PartNumber: n, ETag: sum}
		if have[n] == sum {
			q.resumed.Add(1)
			continue
		}
		size := min(it.PartSize, it.Size-int64(i)*it.PartSize)
		if _, err := f.ReadAt(buf[:size], int64(i)*it.PartSize); err != nil && !(errors.Is(err, io.EOF) && int64(len(buf[:size])) == size) {
			return fmt.Errorf("upload queue: read part %d of %s: %w", n, it.Key, err)
		}
		// The part goes with the MD5 computed at Enqueue as its
		// Content-MD5: the server refuses a part whose bytes differ
		// (BadDigest), so a local file that changed since it was queued
		// never completes an object, without hashing the part here again
		// (1.2 ms of CPU per MB on the test VM). The signature's payload
		// SHA-256 would hash it once more (0.9 ms per MB), so it is left
		// out (UNSIGNED-PAYLOAD; the MD5 header is signed).
		md5b, _ := hex.DecodeString(sum)
		if _, err := c.PutObjectPart(ctx, q.loc.Bucket, it.Key, it.UploadID, n, q.limit(ctx, bytes.NewReader(buf[:size])), size,
			minio.PutObjectPartOptions{Md5Base64: base64.StdEncoding.EncodeToString(md5b), DisableContentSha256: true}); err != nil {
			return fmt.Errorf("upload part %d of %s: %w", n, it.Key, err)
		}
	}
	if _, err := c.CompleteMultipartUpload(ctx, q.loc.Bucket, it.Key, it.UploadID, parts, minio.PutObjectOptions{}); err != nil {
		return fmt.Errorf("complete %s: %w", it.Key, err)
	}
	return q.verify(ctx, it)
}

// limit paces r at the configured rate.
func (q *Queue) limit(ctx context.Context, r io.Reader) io.Reader {
	if q.cfg.RateLimit <= 0 {
		return r
	}
	return &paced{ctx: ctx, r: r, rate: q.cfg.RateLimit, start: time.Now()}
}

type paced struct {
	ctx   context.Context
	r     io.Reader
	rate  int64
	start time.Time
	n     int64
}

func (p *paced) Read(b []byte) (int, error) {
	if len(b) > 64<<10 {
		b = b[:64<<10]
	}
	due := p.start.Add(time.Duration(float64(p.n) / float64(p.rate) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		select {
		case <-p.ctx.Done():
			return 0, p.ctx.Err()
		case <-time.After(d):
		}
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	return n, err
}
