package nn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testModel(seed uint64) *Sequential {
	conv, err := NewConv2d(Conv2dConfig{In: 2, Out: 3, Kernel: 3, Padding: 1, Bias: true}, testRNG(seed))
	if err != nil {
		panic(err)
	}
	return &Sequential{Layers: []Layer{conv, &ReLU{}, NewCosineSimilarity(3, 4, testRNG(seed+1))}}
}

func validCheckpoint(t testing.TB) []byte {
	var buf bytes.Buffer
	if err := SaveCheckpoint(&buf, testModel(1).NamedParams("m."), map[string]string{"epoch": "3", "task": "depth"}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCheckpointRoundTrip(t *testing.T) {
	src, dst := testModel(1), testModel(2)
	b := validCheckpoint(t)
	meta, err := LoadCheckpoint(bytes.NewReader(b), dst.NamedParams("m."))
	if err != nil {
		t.Fatal(err)
	}
	if meta["epoch"] != "3" || meta["task"] != "depth" || len(meta) != 2 {
		t.Errorf("meta = %v", meta)
	}
	sp, dp := src.NamedParams("m."), dst.NamedParams("m.")
	if len(sp) != 3 || sp[0].Name != "m.0.weight" || sp[1].Name != "m.0.bias" || sp[2].Name != "m.2.weight" {
		t.Fatalf("names: %v", sp)
	}
	for i := range sp {
		a, b := Data(sp[i].Value), Data(dp[i].Value)
		for j := range a {
			if a[j] != b[j] {
				t.Fatalf("%s[%d] = %v, want %v", dp[i].Name, j, b[j], a[j])
			}
		}
	}
	// The encoding is deterministic (sorted metadata).
	if !bytes.Equal(b, validCheckpoint(t)) {
		t.Error("two saves of the same model differ")
	}
}

// withCRC recomputes the trailing checksum so that a test reaches the check
// behind it.
func withCRC(b []byte) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

func TestCheckpointErrors(t *testing.T) {
	good := validCheckpoint(t)
	wrongVersion := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(wrongVersion[8:], 2)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x40
	// A huge declared metadata count with a valid checksum.
	hugeCount := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(hugeCount[12:], 1<<31)
	hugeCount = withCRC(hugeCount)

	otherShape := &Sequential{Layers: []Layer{
		mustConv(Conv2dConfig{In: 2, Out: 5, Kernel: 3, Padding: 1, Bias: true}), &ReLU{}, NewCosineSimilarity(3, 4, nil),
	}}
	missing := &Sequential{Layers: []Layer{mustConv(Conv2dConfig{In: 2, Out: 3, Kernel: 3, Padding: 1}), &ReLU{}, NewCosineSimilarity(3, 4, nil)}}
	tests := []struct {
		name   string
		data   []byte
		params []*Param
		inErr  string
		is     error
	}{
		{"empty", nil, testModel(2).NamedParams("m."), "bad magic", ErrNotCheckpoint},
		{"foreign", []byte("PK\x03\x04 this is a zip file"), testModel(2).NamedParams("m."), "bad magic", ErrNotCheckpoint},
		{"truncated header", good[:10], testModel(2).NamedParams("m."), "truncated", nil},
		{"truncated body", good[:len(good)-9], testModel(2).NamedParams("m."), "checksum", nil},
		{"wrong version", wrongVersion, testModel(2).NamedParams("m."), "version 2", nil},
		{"bit flip", flipped, testModel(2).NamedParams("m."), "checksum", nil},
		{"huge count", hugeCount, testModel(2).NamedParams("m."), "exceeds", nil},
		{"shape mismatch", good, otherShape.NamedParams("m."), `"m.0.weight" has shape [3 2 3 3] in the checkpoint, [5 2 3 3]`, nil},
		{"name mismatch", good, testModel(2).NamedParams("other."), `"other.0.weight" missing`, nil},
		{"unused entry", good, missing.NamedParams("m."), `"m.0.bias"`, nil},
		{"duplicate names", good, testModel(2).Params(), "duplicate parameter name", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]float32(nil), Data(tc.params[0].Value)...)
			_, err := LoadCheckpoint(bytes.NewReader(tc.data), tc.params)
			if err == nil || !strings.Contains(err.Error(), tc.inErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.inErr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			for i, v := range Data(tc.params[0].Value) {
				if v != before[i] {
					t.Fatal("a failed load modified the parameters")
				}
			}
		})
	}
	// Every proper prefix of a valid file is rejected.
	for n := 0; n < len(good); n++ {
		if _, err := LoadCheckpoint(bytes.NewReader(good[:n]), testModel(2).NamedParams("m.")); err == nil {
			t.Fatalf("prefix of %d/%d bytes accepted", n, len(good))
		}
	}
}

func mustConv(cfg Conv2dConfig) *Conv2d {
	c, err := NewConv2d(cfg, nil)
	if err != nil {
		panic(err)
	}
	return c
}

func TestCheckpointFileErrorsNamePath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "head.ckpt")
	ps := testModel(1).NamedParams("m.")
	if err := SaveCheckpointFile(path, ps, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpointFile(path, testModel(3).NamedParams("m.")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, filepath.Join(dir, "absent.ckpt")} {
		_, err := LoadCheckpointFile(p, ps)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("error %v does not name %q", err, p)
		}
	}
	bad := filepath.Join(dir, "no-such-dir", "x.ckpt")
	if err := SaveCheckpointFile(bad, ps, nil); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("save error %v does not name %q", err, bad)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".ckpt-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func FuzzLoadCheckpoint(f *testing.F) {
	good := validCheckpoint(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(checkpointMagic))
	f.Add(withCRC(append([]byte(checkpointMagic+"\x01\x00\x00\x00\xff\xff\xff\xff"), 0, 0, 0, 0)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ps := testModel(2).NamedParams("m.")
		meta, err := LoadCheckpoint(bytes.NewReader(data), ps)
		if err == nil && meta == nil {
			t.Fatal("nil metadata without an error")
		}
		// Whatever the parser accepts must re-encode to the same bytes.
		if err == nil {
			var buf bytes.Buffer
			if err := SaveCheckpoint(&buf, ps, meta); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), data) {
				t.Fatal("accepted checkpoint does not round-trip")
			}
		}
	})
}

// endless yields bytes forever and counts how many were read.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n += len(p)
	return len(p), nil
}

func TestCheckpointForeignStreamNotSlurped(t *testing.T) {
	src := &endless{}
	_, err := LoadCheckpoint(src, testModel(1).NamedParams("m."))
	if !errors.Is(err, ErrNotCheckpoint) {
		t.Fatalf("error = %v, want ErrNotCheckpoint", err)
	}
	if src.n > 64 {
		t.Errorf("read %d bytes of a foreign stream before rejecting it", src.n)
	}
}
