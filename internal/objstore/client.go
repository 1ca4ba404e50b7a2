package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/didoedge/didoedge/internal/redact"
)

// Client is an S3 client.
type Client struct {
	mc       *minio.Client
	pageSize int
}

// New makes a client from cfg and logs where it points and where its
// credentials came from (never the credentials).
func New(cfg Config, log *slog.Logger) (*Client, error) {
	host, secure, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	opts := &minio.Options{Creds: cfg.Creds, Secure: secure, Region: cfg.Region, Transport: cfg.Transport}
	mc, err := minio.New(host, opts)
	if err != nil {
		return nil, fmt.Errorf("object storage %s: %w", redact.URL(cfg.Endpoint), err)
	}
	mc.SetAppInfo("didoedge", "1")
	ps := cfg.PageSize
	if ps <= 0 {
		ps = DefaultPageSize
	}
	if log != nil {
		log.Info("object storage", "endpoint", redact.URL(cfg.Endpoint), "region", cfg.Region, "credentials", cfg.CredSource)
	}
	return &Client{mc: mc, pageSize: ps}, nil
}

// Minio is the underlying client, for what this package does not wrap.
func (c *Client) Minio() *minio.Client { return c.mc }

// IsNotFound reports whether err says that a key or bucket does not exist.
func IsNotFound(err error) bool {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return false
	}
	switch resp.Code {
	case minio.NoSuchKey, minio.NoSuchBucket, "NotFound":
		return true
	}
	return false
}

// Object is one listed object.
type Object struct {
	Key  string
	Size int64
	// Dir marks a common prefix ("directory") of a non-recursive listing;
	// its Key ends in a slash.
	Dir bool
	// ModTime is the object's last modification, as the server says it
	// (zero for a Dir).
	ModTime time.Time
}

// List lists the keys under prefix in key order, a page of the client's
// page size per request (minio-go follows the continuation tokens); a
// non-recursive listing stops at the next slash and reports the common
// prefixes as Dir entries. Breaking out of the loop cancels the listing.
func (c *Client) List(ctx context.Context, bucket, prefix string, recursive bool) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for o := range c.mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: recursive, MaxKeys: c.pageSize}) {
			if o.Err != nil {
				yield(Object{}, fmt.Errorf("list %s: %w", Location{bucket, prefix}, o.Err))
				return
			}
			obj := Object{Key: o.Key, Size: o.Size, Dir: strings.HasSuffix(o.Key, "/"), ModTime: o.LastModified}
			if obj.Dir {
				obj.ModTime = time.Time{}
			}
			if !yield(obj, nil) {
				return
			}
		}
	}
}

// hasPrefix reports whether any object's key starts with prefix.
func (c *Client) hasPrefix(ctx context.Context, bucket, prefix string) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for o := range c.mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, MaxKeys: 1}) {
		if o.Err != nil {
			return false, fmt.Errorf("list %s: %w", Location{bucket, prefix}, o.Err)
		}
		return true, nil
	}
	return false, nil
}

// Get opens an object for streaming: one GET whose body the reader
// consumes as it is read (minio-go's Core call: its Object type would send
// a HEAD first to learn the size). A missing object is an error for which
// IsNotFound holds.
func (c *Client) Get(ctx context.Context, loc Location) (io.ReadCloser, minio.ObjectInfo, error) {
	body, info, _, err := minio.Core{Client: c.mc}.GetObject(ctx, loc.Bucket, loc.Key, minio.GetObjectOptions{})
	if err != nil {
		return nil, minio.ObjectInfo{}, fmt.Errorf("get %s: %w", loc, err)
	}
	return body, info, nil
}

// ReadAll reads a whole (small) object.
func (c *Client) ReadAll(ctx context.Context, loc Location) ([]byte, error) {
	r, _, err := c.Get(ctx, loc)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", loc, err)
	}
	return data, nil
}

// Put writes data as the object loc in one request (S3 replaces an object
// whole, so readers never see half of it).
func (c *Client) Put(ctx context.Context, loc Location, data []byte, meta map[string]string) error {
	if loc.Key == "" {
		return fmt.Errorf("put %s: no object key", loc)
	}
	_, err := c.mc.PutObject(ctx, loc.Bucket, loc.Key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: contentType(loc.Key), UserMetadata: meta, DisableMultipart: true})
	if err != nil {
		return fmt.Errorf("put %s: %w", loc, err)
	}
	return nil
}

// Stat returns an object's size, or an error for which IsNotFound holds.
func (c *Client) Stat(ctx context.Context, loc Location) (minio.ObjectInfo, error) {
	info, err := c.mc.StatObject(ctx, loc.Bucket, loc.Key, minio.StatObjectOptions{})
	if err != nil {
		return info, fmt.Errorf("stat %s: %w", loc, err)
	}
	return info, nil
}

func contentType(key string) string {
	switch path.Ext(key) {
	case ".json":
		return "application/json"
	case ".yaml", ".yml":
		return "application/yaml"
	case ".png":
		return "image/png"
	case ".txt":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}
