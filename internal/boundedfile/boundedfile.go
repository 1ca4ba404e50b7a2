package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// Kind is a kind of file with its size cap.
type Kind int

// The kinds of files the runtime reads, each with a cap far above any
// real file of that kind and far below what would hurt a vehicle's memory.
const (
	// Config is a runtime or alerts configuration (configs/*.yaml are a
	// few KB).
	Config Kind = iota
	// Spec is a model IO spec or description (a few KB).
	Spec
	// Calibration is a calibration file of didoedge calibrate, or
	// intrinsics (ROS CameraInfo, KITTI calib: a few KB).
	Calibration
	// Secret is a token or password file: one line.
	Secret
	// PEM is a certificate, key or CA bundle (the system bundle is ~200 KB).
	PEM
	// Model is an ONNX model: protobuf caps a message at 2 GiB.
	Model
	// Image is a frame of an image sequence (PNG, JPEG).
	Image
)

// String names the kind in errors.
func (k Kind) String() string {
	switch k {
	case Config:
		return "config"
	case Spec:
		return "spec"
	case Calibration:
		return "calibration"
	case Secret:
		return "secret"
	case PEM:
		return "PEM"
	case Model:
		return "model"
	case Image:
		return "image"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Limit is the largest file of the kind, in bytes (0 for an unknown kind).
func (k Kind) Limit() int64 {
	switch k {
	case Config, Spec, Calibration:
		return 4 << 20
	case Secret:
		return 64 << 10
	case PEM:
		return 16 << 20
	case Image:
		return 64 << 20
	case Model:
		return 2 << 30
	}
	return 0
}

// ErrNotRegular and ErrTooLarge classify the refusals of Read.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// Error is a refused or failed read: the key that named the file, its
// path and the reason. It never holds the file's content.
type Error struct {
	Key, Path string
	Err       error
}

func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%q: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("%s: %q: %v", e.Key, e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Read reads the file at path, named by the config key key (for errors,
// may be ""), if it is a regular file (symbolic links are followed) of at
// most kind.Limit() bytes.
//
// The file is opened non-blocking, so that a FIFO's open does not wait for
// a writer, and its type and size are taken from the open descriptor
// (fstat), so that a file swapped after a check cannot slip in. The read
// stops one byte past the cap, so a file that grows while read is refused
// too.
func Read(key, path string, kind Kind) ([]byte, error) {
	f, err := Open(key, path, kind)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{key, path, err}
	}
	limit := kind.Limit()
	// Open checked st.Size() <= limit: a buffer of that size plus one byte
	// reads a file that keeps its size without growing; one that grows
	// (or a /proc file, size 0) grows it, up to one byte past the cap.
	buf := make([]byte, 0, st.Size()+1)
	r := io.LimitReader(f, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &Error{key, path, unwrapPath(err)}
		}
	}
	if int64(len(buf)) > limit {
		return nil, &Error{key, path, fmt.Errorf("%w: it grew past the %s cap of %d bytes while read", ErrTooLarge, kind, limit)}
	}
	return buf, nil
}

// Open opens the file at path for reading under Read's checks (regular
// file, at most kind.Limit() bytes at open); the caller reads it bounded
// (a model it hands on by its name, a file it streams).
func Open(key, path string, kind Kind) (*os.File, error) {
	if path == "" {
		return nil, &Error{key, path, errors.New("empty path")}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, &Error{key, path, unwrapPath(err)}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &Error{key, path, unwrapPath(err)}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &Error{key, path, fmt.Errorf("%w (%s)", ErrNotRegular, describe(st.Mode()))}
	}
	if limit := kind.Limit(); st.Size() > limit {
		f.Close()
		return nil, &Error{key, path, fmt.Errorf("%w: %d bytes, the %s cap is %d", ErrTooLarge, st.Size(), kind, limit)}
	}
	// Regular files ignore O_NONBLOCK for reads; clear it anyway so that
	// a caller's reads behave as on any opened file.
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, &Error{key, path, err}
	}
	return f, nil
}

// Named is a file a config key names: the key for messages, the path.
type Named struct{ Key, Path string }

// Check opens and closes the file at path under Read's checks, without
// reading it: for files another library opens by name later.
func Check(key, path string, kind Kind) error {
	f, err := Open(key, path, kind)
	if err != nil {
		return err
	}
	return f.Close()
}

// unwrapPath drops *fs.PathError's own "open path:" prefix, which Error
// already gives.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return m.Type().String()
}
