package dataset

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Data sets are read through io/fs so that the same readers serve a local
// directory (os.DirFS) and object storage (an S3 prefix as an fs.FS, which
// streams each object instead of copying the data set to local disk).
// Inside an fs.FS, names are slash-separated and relative to the data
// set's root; the root's own name (a directory or an s3:// URL) is kept
// beside it only to name files in errors.

// maxFileBytes bounds what one read of a data-set file may return: a PNG of
// maxPixels 16-bit RGBA pixels compressed by nothing is about 512 MiB; a
// larger object is not a frame.
const maxFileBytes = 8*maxPixels + 1<<20

// dirFS is the fs.FS of a local directory, or fsys when one is given.
func dirFS(fsys fs.FS, dir string) fs.FS {
	if fsys != nil {
		return fsys
	}
	return os.DirFS(dir)
}

// display names the file name of the data set rooted at root in messages.
func display(root, name string) string {
	if name == "." || name == "" {
		return root
	}
	if strings.HasSuffix(root, "/") {
		return root + name
	}
	return root + "/" + name
}

// readFile reads one file of fsys whole (one frame's PNG, a split list),
// refusing files larger than maxFileBytes. Errors name root/name.
func readFile(fsys fs.FS, root, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", display(root, name), unwrapPath(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", display(root, name), unwrapPath(err))
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("read %s: larger than %d bytes", display(root, name), maxFileBytes)
	}
	return data, nil
}

// unwrapPath drops an *fs.PathError's own name (os.DirFS's names are
// relative to the root and would read as a wrong path) but keeps what it
// wraps, so errors.Is(err, fs.ErrNotExist) still holds.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// exists reports whether name exists in fsys.
func exists(fsys fs.FS, name string) bool {
	_, err := fs.Stat(fsys, name)
	return err == nil
}

// fsJoin joins slash-separated names inside an fs.FS.
func fsJoin(elem ...string) string { return path.Join(elem...) }
