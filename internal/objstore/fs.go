package objstore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// FS returns the objects under loc as an fs.FS: name "a/b.png" is the
// object loc.Key + "/a/b.png", a "directory" is a key prefix that some
// object has. fs.FS has no context, so ctx (the command's) bounds every
// request the FS makes.
//
// Open of a file sends one GET and streams its body; Stat sends a HEAD;
// ReadDir lists with the "/" delimiter, page by page. The FS also
// implements fs.StatFS and fs.ReadDirFS, so fs.Stat and fs.Glob use them.
func (c *Client) FS(ctx context.Context, loc Location) fs.FS {
	return &s3FS{ctx: ctx, c: c, root: loc}
}

type s3FS struct {
	ctx  context.Context
	c    *Client
	root Location
}

func (f *s3FS) key(name string) Location {
	if name == "." {
		return f.root
	}
	return f.root.Join(name)
}

// isDir reports whether objects exist under name + "/".
func (f *s3FS) isDir(name string) (bool, error) {
	return f.c.hasPrefix(f.ctx, f.root.Bucket, f.key(name).dirPrefix())
}

func (f *s3FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name != "." {
		r, info, err := f.c.Get(f.ctx, f.key(name))
		if err == nil {
			return &s3File{r: r, info: fileInfo{name: path.Base(name), size: info.Size, mod: info.LastModified}}, nil
		}
		if !IsNotFound(err) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
	ok, err := f.isDir(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &s3Dir{fsys: f, name: name}, nil
}

func (f *s3FS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if name != "." {
		info, err := f.c.Stat(f.ctx, f.key(name))
		if err == nil {
			return fileInfo{name: path.Base(name), size: info.Size, mod: info.LastModified}, nil
		}
		if !IsNotFound(err) {
			return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
		}
	}
	ok, err := f.isDir(name)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return fileInfo{name: path.Base(name), dir: true}, nil
}

// ReadDir lists name's entries, sorted by name as fs.ReadDir promises
// (S3 sorts keys by their bytes, which puts "a/" after "a.png" or before
// "a0" where a path sort would not).
func (f *s3FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	prefix := f.key(name).dirPrefix()
	var out []fs.DirEntry
	for o, err := range f.c.List(f.ctx, f.root.Bucket, prefix, false) {
		if err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
		}
		base := strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), "/")
		if base == "" || strings.Contains(base, "/") {
			continue // a "directory marker" object, or a key no FS name reaches
		}
		out = append(out, fs.FileInfoToDirEntry(fileInfo{name: base, size: o.Size, dir: o.Dir, mod: o.ModTime}))
	}
	if len(out) == 0 && name != "." {
		// S3 has no empty directories: no entry means no directory.
		if _, err := f.Stat(name); err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
		}
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

type fileInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return i.size }
func (i fileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i fileInfo) ModTime() time.Time { return i.mod }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }

// s3File streams one object's body.
type s3File struct {
	r    io.ReadCloser
	info fileInfo
}

func (f *s3File) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *s3File) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *s3File) Close() error               { return f.r.Close() }

// s3Dir is an open "directory": its entries are listed on the first
// ReadDir.
type s3Dir struct {
	fsys    *s3FS
	name    string
	entries []fs.DirEntry
	listed  bool
}

func (d *s3Dir) Stat() (fs.FileInfo, error) {
	return fileInfo{name: path.Base(d.name), dir: true}, nil
}

func (d *s3Dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errors.New("is a directory")}
}

func (d *s3Dir) Close() error { return nil }

// ReadDir follows fs.ReadDirFile: n > 0 returns at most n entries and
// io.EOF at the end, n <= 0 returns the rest.
func (d *s3Dir) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.listed {
		e, err := d.fsys.ReadDir(d.name)
		if err != nil {
			return nil, err
		}
		d.entries, d.listed = e, true
	}
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	k := min(n, len(d.entries))
	out := d.entries[:k]
	d.entries = d.entries[k:]
	return out, nil
}
