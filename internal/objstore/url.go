package objstore

import (
	"fmt"
	"path"
	"strings"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Scheme prefixes an object-storage location.
const Scheme = "s3://"

// IsURL reports whether loc names object storage rather than a local path.
func IsURL(loc string) bool { return strings.HasPrefix(loc, Scheme) }

// Location is a bucket and a key or key prefix in it.
type Location struct {
	Bucket string
	// Key is the object key, or the prefix of a "directory" (without its
	// trailing slash; "" is the whole bucket).
	Key string
}

// ParseURL splits s3://bucket/key. The key is cleaned of a trailing slash;
// empty segments, "." and ".." are refused (no S3 server agrees on them).
func ParseURL(raw string) (Location, error) {
	if !IsURL(raw) {
		return Location{}, fmt.Errorf("object storage location %q: want s3://bucket/prefix", raw)
	}
	rest := strings.TrimPrefix(raw, Scheme)
	bucket, key, _ := strings.Cut(rest, "/")
	if err := s3utils.CheckValidBucketNameStrict(bucket); err != nil {
		return Location{}, fmt.Errorf("object storage location %q: bucket %q: %w", raw, bucket, err)
	}
	key = strings.TrimSuffix(key, "/")
	if key != "" {
		for _, seg := range strings.Split(key, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return Location{}, fmt.Errorf("object storage location %q: key %q has an empty, . or .. segment", raw, key)
			}
		}
	}
	return Location{Bucket: bucket, Key: key}, nil
}

// String spells the location as a URL.
func (l Location) String() string {
	if l.Key == "" {
		return Scheme + l.Bucket
	}
	return Scheme + l.Bucket + "/" + l.Key
}

// Join returns the location of name (slash-separated) under l.
func (l Location) Join(name string) Location {
	return Location{Bucket: l.Bucket, Key: strings.TrimPrefix(path.Join(l.Key, name), "/")}
}

// dirPrefix is the key prefix of the objects "in" l: its key and a slash.
func (l Location) dirPrefix() string {
	if l.Key == "" {
		return ""
	}
	return l.Key + "/"
}
