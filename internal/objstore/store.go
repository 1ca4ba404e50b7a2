package objstore

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Store resolves locations, each a local path or an s3:// URL, for the
// commands that read data sets and write summaries, calibration files and
// reports. The S3 client is made on the first s3:// location, so local
// runs need neither credentials nor an endpoint.
type Store struct {
	config func() (Config, error)
	log    *slog.Logger

	once   sync.Once
	client *Client
	err    error
}

// NewStore makes a store whose S3 client comes from config.
func NewStore(config func() (Config, error), log *slog.Logger) *Store {
	return &Store{config: config, log: log}
}

// FromEnvironment is the binary's store: ConfigFromEnv over the process
// environment and the user's home directory.
func FromEnvironment(log *slog.Logger) *Store {
	return NewStore(func() (Config, error) {
		home, _ := os.UserHomeDir()
		return ConfigFromEnv(os.Getenv, home)
	}, log)
}

// Client returns the S3 client, making it on first use.
func (s *Store) Client() (*Client, error) {
	s.once.Do(func() {
		cfg, err := s.config()
		if err != nil {
			s.err = fmt.Errorf("object storage: %w", err)
			return
		}
		s.client, s.err = New(cfg, s.log)
	})
	return s.client, s.err
}

func (s *Store) remote(loc string) (*Client, Location, error) {
	l, err := ParseURL(loc)
	if err != nil {
		return nil, Location{}, err
	}
	c, err := s.Client()
	if err != nil {
		return nil, Location{}, err
	}
	return c, l, nil
}

// DirFS returns the directory or prefix loc as an fs.FS; requests made
// through it are bounded by ctx.
func (s *Store) DirFS(ctx context.Context, loc string) (fs.FS, error) {
	if !IsURL(loc) {
		return os.DirFS(loc), nil
	}
	c, l, err := s.remote(loc)
	if err != nil {
		return nil, err
	}
	return c.FS(ctx, l), nil
}

// Open opens the file or object loc for one streamed read and returns its
// size: an object is one GET whose body is consumed as it is read, never
// copied whole, so a reader of a multi-gigabyte recording holds only what
// it buffers. Each call is a new GET.
func (s *Store) Open(ctx context.Context, loc string) (io.ReadCloser, int64, error) {
	if !IsURL(loc) {
		f, err := os.Open(loc)
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err == nil && st.IsDir() {
			err = fmt.Errorf("%s is a directory", loc)
		}
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, st.Size(), nil
	}
	c, l, err := s.remote(loc)
	if err != nil {
		return nil, 0, err
	}
	if l.Key == "" {
		return nil, 0, fmt.Errorf("%s: names a bucket, not an object", loc)
	}
	r, info, err := c.Get(ctx, l)
	if err != nil {
		return nil, 0, err
	}
	return r, info.Size, nil
}

// ReadFile reads the file or object loc whole.
func (s *Store) ReadFile(ctx context.Context, loc string) ([]byte, error) {
	if !IsURL(loc) {
		return os.ReadFile(loc)
	}
	c, l, err := s.remote(loc)
	if err != nil {
		return nil, err
	}
	return c.ReadAll(ctx, l)
}

// WriteFile writes data to loc whole: a local file through a temporary
// file in the same directory and a rename, an object in one PUT; either
// way a reader sees the old content or the new, never a part.
func (s *Store) WriteFile(ctx context.Context, loc string, data []byte) error {
	if IsURL(loc) {
		c, l, err := s.remote(loc)
		if err != nil {
			return err
		}
		return c.Put(ctx, l, data, nil)
	}
	tmp, err := os.CreateTemp(filepath.Dir(loc), "."+filepath.Base(loc)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", loc, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", loc, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", loc, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", loc, err)
	}
	if err := os.Rename(tmp.Name(), loc); err != nil {
		return fmt.Errorf("write %s: %w", loc, err)
	}
	return nil
}

// Expand replaces each directory or prefix of locs by its files whose
// names end in suffix (not below it), sorted; a file or object stays as
// it is. A directory or prefix without such files is an error.
func (s *Store) Expand(ctx context.Context, locs []string, suffix string) ([]string, error) {
	var out []string
	for _, loc := range locs {
		var files []string
		var err error
		if IsURL(loc) {
			files, err = s.expandRemote(ctx, loc, suffix)
		} else {
			files, err = expandLocal(loc, suffix)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

func expandLocal(loc, suffix string) ([]string, error) {
	st, err := os.Stat(loc)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{loc}, nil
	}
	ents, err := os.ReadDir(loc)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), suffix) && !strings.HasPrefix(e.Name(), ".") {
			files = append(files, filepath.Join(loc, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("directory %s has no *%s file", loc, suffix)
	}
	slices.Sort(files)
	return files, nil
}

func (s *Store) expandRemote(ctx context.Context, loc, suffix string) ([]string, error) {
	c, l, err := s.remote(loc)
	if err != nil {
		return nil, err
	}
	if l.Key != "" {
		if _, err := c.Stat(ctx, l); err == nil {
			return []string{loc}, nil
		} else if !IsNotFound(err) {
			return nil, err
		}
	}
	var files []string
	for o, err := range c.List(ctx, l.Bucket, l.dirPrefix(), false) {
		if err != nil {
			return nil, err
		}
		if !o.Dir && strings.HasSuffix(o.Key, suffix) {
			files = append(files, Location{Bucket: l.Bucket, Key: o.Key}.String())
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no object, and no *%s object under it", l, suffix)
	}
	slices.Sort(files)
	return files, nil
}
