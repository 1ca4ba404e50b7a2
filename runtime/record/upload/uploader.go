package upload

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
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

// S3's additional-checksum headers (CRC-64/NVME, full-object type).
const (
	hdrCRC64NVME    = "x-amz-checksum-crc64nvme"
	hdrChecksumAlgo = "x-amz-checksum-algorithm"
	hdrChecksumType = "x-amz-checksum-type"
)

// verify checks the object against the item: its size and the
// full-object CRC-64/NVME the server stored for it (a HEAD with
// x-amz-checksum-mode: ENABLED). The server computed that checksum from
// the bytes it received and refused them unless it equalled the one the
// request carried, so equality here means the server holds the queued
// bytes.
func (q *Queue) verify(ctx context.Context, it *item) error {
	info, err := q.client.Minio().StatObject(ctx, q.loc.Bucket, it.Key, minio.StatObjectOptions{Checksum: true})
	if err != nil {
		return err
	}
	switch {
	case info.Size != it.Size:
		return fmt.Errorf("verify %s: size %d, want %d: %w", it.Key, info.Size, it.Size, errMismatch)
	case info.ChecksumCRC64NVME == "":
		return fmt.Errorf("verify %s: the server reports no CRC64NVME checksum (does it support S3 additional checksums?): %w", it.Key, errMismatch)
	case info.ChecksumCRC64NVME != it.CRC64NVME:
		return fmt.Errorf("verify %s: CRC64NVME %s, want %s: %w", it.Key, info.ChecksumCRC64NVME, it.CRC64NVME, errMismatch)
	}
	return nil
}

// putOptions are the object's metadata (the recorder's identities) plus
// the given S3 headers.
func (it *item) putOptions(headers ...string) minio.PutObjectOptions {
	meta := make(map[string]string, len(it.Meta)+len(headers)/2)
	for k, v := range it.Meta {
		meta[k] = v
	}
	for i := 0; i+1 < len(headers); i += 2 {
		meta[headers[i]] = headers[i+1]
	}
	// Unsigned payload: the CRC header (signed) is the body's check, so
	// nothing hashes the body with SHA-256 for the signature (minio-go
	// would otherwise sign it chunk by chunk over plain HTTP).
	return minio.PutObjectOptions{UserMetadata: meta, ContentType: "application/octet-stream", DisableContentSha256: true}
}

// upload sends one item and verifies it.
func (q *Queue) upload(ctx context.Context, it *item) error {
	if it.legacy() {
		if err := q.upgrade(it); err != nil {
			return err
		}
	}
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
		// The request carries the CRC-64/NVME computed at Enqueue: the
		// server computes it over the body it receives and refuses a
		// mismatch (BadDigest), so a file changed since it was queued
		// never becomes the object, and nothing here hashes it again.
		if _, err := q.core().PutObject(ctx, q.loc.Bucket, it.Key, q.limit(ctx, f), it.Size, "", "",
			it.putOptions(hdrCRC64NVME, it.CRC64NVME)); err != nil {
			return fmt.Errorf("put %s: %w", it.Key, err)
		}
		return q.verify(ctx, it)
	}
	return q.multipart(ctx, it, f)
}

func (q *Queue) multipart(ctx context.Context, it *item, f *os.File) error {
	c := q.core()
	// have: the parts the server holds, by number: ETag (which the
	// completion names) and CRC-64/NVME (which must be the queued one).
	type serverPart struct{ etag, crc string }
	have := map[int]serverPart{}
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
				have[p.PartNumber] = serverPart{etag: strings.Trim(p.ETag, `"`), crc: p.ChecksumCRC64NVME}
			}
			if !res.IsTruncated {
				break
			}
			marker = res.NextPartNumberMarker
		}
		kept := 0
		for i, sum := range it.PartCRC64NVME {
			if p, ok := have[i+1]; ok && p.crc == sum {
				kept++
			}
		}
		// parts_kept: those whose CRC-64/NVME on the server is the queued
		// one; the others are sent (again).
		q.log.Info("upload: resuming", "key", it.Key, "parts_on_server", len(have), "parts_kept", kept, "parts", len(it.PartCRC64NVME))
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
		// A full-object CRC-64/NVME upload: each part is checked against
		// its CRC on receipt, and the completion against the file's.
		id, err := c.NewMultipartUpload(ctx, q.loc.Bucket, it.Key,
			it.putOptions(hdrChecksumAlgo, "CRC64NVME", hdrChecksumType, "FULL_OBJECT"))
		if err != nil {
			return fmt.Errorf("start upload of %s: %w", it.Key, err)
		}
		it.UploadID = id
		if err := q.writeSidecar(it); err != nil {
			return err
		}
	}
	parts := make([]minio.CompletePart, len(it.PartCRC64NVME))
	for i, sum := range it.PartCRC64NVME {
		n := i + 1
		parts[i] = minio.CompletePart{PartNumber: n, ChecksumCRC64NVME: sum}
		if p, ok := have[n]; ok && p.crc == sum {
			parts[i].ETag = p.etag
			q.resumed.Add(1)
			continue
		}
		// The part goes with the CRC-64/NVME computed at Enqueue: the
		// server refuses a part whose bytes differ (BadDigest), so a local
		// file that changed since it was queued never completes an object;
		// the payload is unsigned (UNSIGNED-PAYLOAD; the CRC header is
		// signed), so nothing hashes the part here. It is read from the
		// file as it is sent (a section reader: minio-go's retry seeks it
		// back to the part's start), not through a part-sized buffer.
		size := min(it.PartSize, it.Size-int64(i)*it.PartSize)
		h := http.Header{}
		h.Set(hdrCRC64NVME, sum)
		p, err := c.PutObjectPart(ctx, q.loc.Bucket, it.Key, it.UploadID, n, q.limit(ctx, io.NewSectionReader(f, int64(i)*it.PartSize, size)), size,
			minio.PutObjectPartOptions{CustomHeader: h, DisableContentSha256: true})
		if err != nil {
			return fmt.Errorf("upload part %d of %s: %w", n, it.Key, err)
		}
		parts[i].ETag = p.ETag
	}
	// The completion carries the file's CRC-64/NVME: the server combines
	// the parts' checksums and refuses a different whole.
	if _, err := c.CompleteMultipartUpload(ctx, q.loc.Bucket, it.Key, it.UploadID, parts,
		minio.PutObjectOptions{UserMetadata: map[string]string{hdrCRC64NVME: it.CRC64NVME, hdrChecksumType: "FULL_OBJECT"}}); err != nil {
		return fmt.Errorf("complete %s: %w", it.Key, err)
	}
	return q.verify(ctx, it)
}

// upgrade turns an item queued with the older SHA-256 and part-MD5
// sidecar into a CRC-64/NVME one. One read of the file checks it against
// the old sums (a file changed since it was queued fails here, is
// retried and stays queued, as before) and computes the CRCs from the
// same bytes. A multipart upload the old format had started is dropped
// from the sidecar: its parts carry no CRC, so the next attempt aborts it
// (as any unrecorded upload of the key) and starts a checksummed one.
func (q *Queue) upgrade(it *item) error {
	path := q.dataPath(it.Seq)
	sha := sha256.New()
	up := *it
	up.PartCRC64NVME, up.CRC64NVME = nil, ""
	var partMD5 []string
	err := hashParts(path, it.PartSize, sha, md5.New, func(whole, part []byte, ph hash.Hash) {
		up.PartCRC64NVME = append(up.PartCRC64NVME, encodeCRC(part))
		up.CRC64NVME = encodeCRC(whole)
		partMD5 = append(partMD5, hex.EncodeToString(ph.Sum(nil)))
	})
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(sha.Sum(nil)); got != it.SHA256 || !slices.Equal(partMD5, it.PartMD5) {
		return fmt.Errorf("upload queue: %s (queued as %s) changed since it was queued: sha256 %s, want %s", path, it.Key, got, it.SHA256)
	}
	up.SHA256, up.PartMD5, up.UploadID = "", nil, ""
	if err := q.writeSidecar(&up); err != nil {
		return err
	}
	q.log.Info("upload: upgraded a queued item to CRC64NVME checksums", "key", it.Key)
	*it = up
	return nil
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
