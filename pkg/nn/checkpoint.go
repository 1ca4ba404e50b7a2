package nn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"sort"
)

// Checkpoint format, version 1 (all integers little-endian):
//
//	magic    8 bytes  "DIDONNCK"
//	version  uint32   1
//	nmeta    uint32   metadata pairs, sorted by key
//	  klen uint32, key bytes, vlen uint32, value bytes      (nmeta times)
//	nparams  uint32
//	  nlen uint32, name bytes, rank uint32, dims uint32×rank,
//	  values float32×Π dims                                 (nparams times)
//	crc      uint32   CRC-32C (Castagnoli) of every byte before it
//
// Names are unique; parameters are written in the order given.
const (
	checkpointMagic   = "DIDONNCK"
	checkpointVersion = 1
	maxNameLen        = 1 << 12
	maxMetaLen        = 1 << 20
	maxRank           = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrNotCheckpoint reports a file that does not start with the checkpoint magic.
var ErrNotCheckpoint = errors.New("not a didoedge nn checkpoint (bad magic)")

// SaveCheckpoint writes params (by name, with shapes) and meta to w.
func SaveCheckpoint(w io.Writer, params []*Param, meta map[string]string) error {
	if err := checkNames(params); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString(checkpointMagic)
	u32 := func(v int) { binary.Write(&buf, binary.LittleEndian, uint32(v)) }
	str := func(s string) { u32(len(s)); buf.WriteString(s) }
	u32(checkpointVersion)
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	u32(len(keys))
	for _, k := range keys {
		if len(k) > maxNameLen || len(meta[k]) > maxMetaLen {
			return fmt.Errorf("save checkpoint: metadata %q too long", k)
		}
		str(k)
		str(meta[k])
	}
	u32(len(params))
	var f [4]byte
	for _, p := range params {
		data := Data(p.Value)
		if data == nil {
			return fmt.Errorf("save checkpoint: parameter %q is not a float32 tensor", p.Name)
		}
		sh := p.Value.Shape()
		if len(sh) > maxRank {
			return fmt.Errorf("save checkpoint: parameter %q has rank %d > %d", p.Name, len(sh), maxRank)
		}
		str(p.Name)
		u32(len(sh))
		for _, d := range sh {
			u32(d)
		}
		for _, v := range data {
			binary.LittleEndian.PutUint32(f[:], math.Float32bits(v))
			buf.Write(f[:])
		}
	}
	u32(int(crc32.Checksum(buf.Bytes(), castagnoli)))
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

func checkNames(params []*Param) error {
	seen := make(map[string]bool, len(params))
	for i, p := range params {
		if p == nil || p.Value == nil {
			return fmt.Errorf("parameter %d is nil", i)
		}
		if p.Name == "" || len(p.Name) > maxNameLen {
			return fmt.Errorf("parameter %d has an empty or too long name", i)
		}
		if seen[p.Name] {
			return fmt.Errorf("duplicate parameter name %q (use Prefix to qualify names)", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// reader decodes the checkpoint body with bounds checks; the first error sticks.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.off, fmt.Sprintf(format, args...))
	}
}

func (r *reader) u32(what string) int {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 4 {
		r.fail("truncated %s", what)
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return int(v)
}

func (r *reader) str(what string, limit int) string {
	n := r.u32(what + " length")
	if r.err != nil {
		return ""
	}
	if n > limit || n > len(r.b)-r.off {
		r.fail("%s length %d exceeds the limit or the remaining data", what, n)
		return ""
	}
	s := string(r.b[r.off : r.off+n])
	r.off += n
	return s
}

type ckptEntry struct {
	shape []int
	data  []byte // raw little-endian float32 values
}

// LoadCheckpoint reads a checkpoint written by SaveCheckpoint into params,
// matching entries by name and requiring equal shapes, and returns its
// metadata. Every parameter must be present and every entry must be used; on
// any error no parameter is modified.
func LoadCheckpoint(r io.Reader, params []*Param) (map[string]string, error) {
	meta, err := loadCheckpoint(r, params)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	return meta, nil
}

func loadCheckpoint(r io.Reader, params []*Param) (map[string]string, error) {
	if err := checkNames(params); err != nil {
		return nil, err
	}
	// Check the header before reading the rest, so that a large foreign file
	// is rejected without being read into memory.
	head := make([]byte, len(checkpointMagic)+4)
	n, err := io.ReadFull(r, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	if err := parseHeader(head[:n]); err != nil {
		return nil, err
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	meta, entries, err := parseCheckpoint(append(head, rest...))
	if err != nil {
		return nil, err
	}
	for _, p := range params {
		e, ok := entries[p.Name]
		if !ok {
			return nil, fmt.Errorf("parameter %q missing from the checkpoint", p.Name)
		}
		if !sameShape(p.Value.Shape(), e.shape) {
			return nil, fmt.Errorf("parameter %q has shape %v in the checkpoint, %v in the model", p.Name, e.shape, []int(p.Value.Shape()))
		}
		if Data(p.Value) == nil {
			return nil, fmt.Errorf("parameter %q is not a float32 tensor", p.Name)
		}
	}
	if len(entries) != len(params) {
		names := map[string]bool{}
		for _, p := range params {
			names[p.Name] = true
		}
		var extra []string
		for n := range entries {
			if !names[n] {
				extra = append(extra, n)
			}
		}
		sort.Strings(extra)
		return nil, fmt.Errorf("entries %q match no model parameter", extra)
	}
	for _, p := range params {
		e, dst := entries[p.Name], Data(p.Value)
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(e.data[4*i:]))
		}
	}
	return meta, nil
}

// parseHeader checks the magic and the version at the start of b.
func parseHeader(b []byte) error {
	if len(b) < len(checkpointMagic) || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return ErrNotCheckpoint
	}
	if len(b) < len(checkpointMagic)+4 {
		return fmt.Errorf("truncated header (%d bytes)", len(b))
	}
	if v := binary.LittleEndian.Uint32(b[len(checkpointMagic):]); v != checkpointVersion {
		return fmt.Errorf("unsupported checkpoint version %d (this build reads version %d)", v, checkpointVersion)
	}
	return nil
}

func parseCheckpoint(b []byte) (map[string]string, map[string]ckptEntry, error) {
	if err := parseHeader(b); err != nil {
		return nil, nil, err
	}
	if len(b) < len(checkpointMagic)+8 {
		return nil, nil, fmt.Errorf("truncated header (%d bytes)", len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, nil, fmt.Errorf("checksum mismatch (stored %08x, computed %08x): file truncated or corrupt", sum, got)
	}
	rd := &reader{b: body, off: len(checkpointMagic) + 4}
	nmeta := rd.u32("metadata count")
	meta := map[string]string{}
	for i := 0; i < nmeta && rd.err == nil; i++ {
		k := rd.str("metadata key", maxNameLen)
		v := rd.str("metadata value", maxMetaLen)
		if _, dup := meta[k]; dup && rd.err == nil {
			rd.fail("duplicate metadata key %q", k)
		}
		meta[k] = v
	}
	nparams := rd.u32("parameter count")
	entries := map[string]ckptEntry{}
	for i := 0; i < nparams && rd.err == nil; i++ {
		name := rd.str("parameter name", maxNameLen)
		rank := rd.u32("rank")
		if rd.err != nil {
			break
		}
		if rank > maxRank {
			rd.fail("parameter %q rank %d exceeds %d", name, rank, maxRank)
			break
		}
		shape := make([]int, rank)
		count := 1
		for d := range shape {
			shape[d] = rd.u32("dimension")
			if count > 0 && shape[d] > (len(body)-rd.off)/4/count+1 {
				rd.fail("parameter %q shape exceeds the remaining data", name)
			}
			count *= shape[d]
		}
		if rd.err != nil {
			break
		}
		if count*4 > len(body)-rd.off {
			rd.fail("parameter %q: %d values exceed the remaining data", name, count)
			break
		}
		if _, dup := entries[name]; dup {
			rd.fail("duplicate parameter %q", name)
			break
		}
		entries[name] = ckptEntry{shape: shape, data: body[rd.off : rd.off+4*count]}
		rd.off += 4 * count
	}
	if rd.err == nil && rd.off != len(body) {
		rd.fail("%d unexpected trailing bytes", len(body)-rd.off)
	}
	if rd.err != nil {
		return nil, nil, rd.err
	}
	return meta, entries, nil
}

// SaveCheckpointFile writes a checkpoint to path atomically (temporary file,
// fsync, rename); errors name the path.
func SaveCheckpointFile(path string, params []*Param, meta map[string]string) error {
	tmp, err := os.CreateTemp(dirOf(path), ".ckpt-*")
	if err != nil {
		return fmt.Errorf("save checkpoint %q: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := SaveCheckpoint(tmp, params, meta); err != nil {
		tmp.Close()
		return fmt.Errorf("checkpoint %q: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save checkpoint %q: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save checkpoint %q: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save checkpoint %q: %w", path, err)
	}
	return nil
}

// LoadCheckpointFile loads a checkpoint from path; errors name the path.
func LoadCheckpointFile(path string, params []*Param) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	defer f.Close()
	meta, err := loadCheckpoint(f, params)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %q: %w", path, err)
	}
	return meta, nil
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if os.IsPathSeparator(path[i]) {
			if i == 0 {
				return path[:1]
			}
			return path[:i]
		}
	}
	return "."
}

// Prefix returns copies of the Param handles named prefix + "." + name (values
// and gradients are shared), to give the parameters of a model unique names in
// a checkpoint: Prefix("head.conv1", conv.Params()).
func Prefix(prefix string, params []*Param) []*Param {
	out := make([]*Param, len(params))
	for i, p := range params {
		out[i] = &Param{Name: prefix + "." + p.Name, Value: p.Value, Grad: p.Grad}
	}
	return out
}
