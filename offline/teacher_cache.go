package offline

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"
)

// teacherCache holds the teacher's read-out of each frame of one frame
// source, keyed by the teacher's sha256, its spec and the frames: one file
// per frame (the teacher's depth read-out at the frame's size, and its
// confidence read-out when it has one), written whole (temporary file and
// rename), so an interrupted run keeps every frame it finished.
type teacherCache struct {
	dir  string
	temp bool
}

func openTeacherCache(root string, key any) (*teacherCache, error) {
	c := &teacherCache{}
	dir, kj, temp, err := keyedCacheDir(root, "teacher", key)
	if err != nil {
		return nil, fmt.Errorf("teacher cache: %w", err)
	}
	c.dir, c.temp = dir, temp
	metaPath := filepath.Join(c.dir, "meta.json")
	if b, err := os.ReadFile(metaPath); err == nil {
		var have struct {
			Key json.RawMessage `json:"key"`
		}
		if err := json.Unmarshal(b, &have); err != nil || !jsonEqual(have.Key, kj) {
			return nil, fmt.Errorf("teacher cache %q: meta.json does not match this run's key (delete the directory to rebuild it)", c.dir)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		b, _ := json.MarshalIndent(map[string]any{"key": json.RawMessage(kj), "created": time.Now().UTC().Format(time.RFC3339)}, "", "  ")
		if err := os.WriteFile(metaPath, append(b, '\n'), 0o644); err != nil {
			return nil, fmt.Errorf("teacher cache: %w", err)
		}
	} else {
		return nil, fmt.Errorf("teacher cache: %w", err)
	}
	return c, nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func (c *teacherCache) path(i int) string { return filepath.Join(c.dir, fmt.Sprintf("%07d.bin", i)) }

// teacherMagic starts a teacher cache file: "DTC1", width, height, and
// whether a confidence map follows the depth map (float32 little endian).
const teacherMagic = "DTC1"

// load reads frame i of size w x h into depth and conf (conf nil: the
// teacher has none); ok false when the cache does not hold it. The file's
// size is checked against w x h before anything is read into memory.
func (c *teacherCache) load(i, w, h int, depth, conf []float32) (bool, error) {
	f, err := os.Open(c.path(i))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("teacher cache: %w", err)
	}
	defer f.Close()
	maps := 1
	if conf != nil {
		maps = 2
	}
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("teacher cache: %w", err)
	}
	if want := int64(16 + 4*maps*w*h); st.Size() != want {
		return false, fmt.Errorf("teacher cache %q: %d bytes, a %dx%d frame with %d map(s) takes %d (delete the directory to rebuild it)", c.path(i), st.Size(), w, h, maps, want)
	}
	buf := make([]byte, st.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return false, fmt.Errorf("teacher cache %q: %w", c.path(i), err)
	}
	if string(buf[:4]) != teacherMagic || int(binary.LittleEndian.Uint32(buf[4:])) != w || int(binary.LittleEndian.Uint32(buf[8:])) != h ||
		int(binary.LittleEndian.Uint32(buf[12:])) != maps-1 {
		return false, fmt.Errorf("teacher cache %q: header does not describe a %dx%d frame with %d map(s)", c.path(i), w, h, maps)
	}
	o := 16
	for _, m := range [][]float32{depth, conf}[:maps] {
		for k := range m[:w*h] {
			m[k] = math.Float32frombits(binary.LittleEndian.Uint32(buf[o:]))
			o += 4
		}
	}
	return true, nil
}

// store writes frame i.
func (c *teacherCache) store(i, w, h int, depth, conf []float32) error {
	maps := 1
	if conf != nil {
		maps = 2
	}
	buf := make([]byte, 16+4*maps*w*h)
	copy(buf, teacherMagic)
	binary.LittleEndian.PutUint32(buf[4:], uint32(w))
	binary.LittleEndian.PutUint32(buf[8:], uint32(h))
	binary.LittleEndian.PutUint32(buf[12:], uint32(maps-1))
	o := 16
	for _, m := range [][]float32{depth, conf}[:maps] {
		for _, v := range m[:w*h] {
			binary.LittleEndian.PutUint32(buf[o:], math.Float32bits(v))
			o += 4
		}
	}
	tmp := c.path(i) + ".tmp"
	if err := os.WriteFile(tmp, buf, 0o644); err != nil {
		return fmt.Errorf("teacher cache: %w", err)
	}
	if err := os.Rename(tmp, c.path(i)); err != nil {
		return fmt.Errorf("teacher cache: %w", err)
	}
	return nil
}

func (c *teacherCache) Close() error {
	if c.temp {
		return os.RemoveAll(c.dir)
	}
	return nil
}
