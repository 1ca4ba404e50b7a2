package h264

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestSplitAnnexB(t *testing.T) {
	cases := []struct {
		name    string
		in      []byte
		want    [][]byte
		wantErr string
	}{
		{"empty", nil, nil, ""},
		{"four-byte codes", []byte{0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3}, [][]byte{{0x67, 1, 2}, {0x68, 3}}, ""},
		{"three-byte codes", []byte{0, 0, 1, 0x65, 9, 0, 0, 1, 0x41}, [][]byte{{0x65, 9}, {0x41}}, ""},
		{"trailing zeros", []byte{0, 0, 1, 0x65, 9, 0, 0, 0, 0, 0, 1, 0x41, 0, 0}, [][]byte{{0x65, 9}, {0x41}}, ""},
		{"leading zeros", []byte{0, 0, 0, 0, 0, 1, 0x09, 0xf0}, [][]byte{{0x09, 0xf0}}, ""},
		{"empty units skipped", []byte{0, 0, 1, 0, 0, 1, 0x41}, [][]byte{{0x41}}, ""},
		{"junk before first code", []byte{7, 0, 0, 1, 0x41}, nil, "before the first start code"},
		{"no start code", []byte{0x41, 0x42}, nil, "no start code"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SplitAnnexB(nil, tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalUnits(got, tc.want) {
				t.Fatalf("got %x, want %x", got, tc.want)
			}
		})
	}
}

func TestSplitAVCC(t *testing.T) {
	cases := []struct {
		name    string
		in      []byte
		size    int
		want    [][]byte
		wantErr string
	}{
		{"4-byte", []byte{0, 0, 0, 2, 0x67, 1, 0, 0, 0, 1, 0x68}, 4, [][]byte{{0x67, 1}, {0x68}}, ""},
		{"2-byte", []byte{0, 1, 0x65, 0, 2, 0x41, 7}, 2, [][]byte{{0x65}, {0x41, 7}}, ""},
		{"1-byte", []byte{1, 0x65}, 1, [][]byte{{0x65}}, ""},
		{"overrun", []byte{0, 0, 0, 9, 0x67}, 4, nil, "overruns"},
		{"short length", []byte{0, 0, 0, 1, 0x67, 0, 0}, 4, nil, "trailing bytes"},
		{"bad size", []byte{1, 2}, 3, nil, "length size 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SplitAVCC(nil, tc.in, tc.size)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !equalUnits(got, tc.want) {
				t.Fatalf("got %x, %v; want %x", got, err, tc.want)
			}
		})
	}
}

func equalUnits(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}

// FuzzSplitAnnexB: splitting never panics, and the units it yields survive
// an Annex-B and an AVCC round trip unchanged.
func FuzzSplitAnnexB(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3})
	f.Add([]byte{0, 0, 1, 0, 0, 0, 1, 0x41, 0, 0})
	f.Add([]byte{0, 0, 1, 0, 1, 0x41})
	for _, name := range []string{"testdata/tiny.h264", "testdata/tiny96.h264"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		units, err := SplitAnnexB(nil, b)
		if err != nil {
			return
		}
		again, err := SplitAnnexB(nil, AppendAnnexB(nil, units))
		if err != nil || !equalUnits(units, again) {
			t.Fatalf("annex-b round trip: %x -> %x (%v)", units, again, err)
		}
		avcc, err := SplitAVCC(nil, AppendAVCC(nil, units), 4)
		if err != nil || !equalUnits(units, avcc) {
			t.Fatalf("avcc round trip: %x -> %x (%v)", units, avcc, err)
		}
		if AnnexBSize(units) != len(AppendAnnexB(nil, units)) {
			t.Fatal("AnnexBSize disagrees with AppendAnnexB")
		}
	})
}

// FuzzSplitAVCC: arbitrary length-prefixed input never panics and never
// yields a unit outside the buffer.
func FuzzSplitAVCC(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, 0x67, 1, 0, 0, 0, 1, 0x68}, uint8(4))
	f.Add([]byte{0, 1, 0x65}, uint8(2))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint8(4))
	f.Fuzz(func(t *testing.T, b []byte, size uint8) {
		units, err := SplitAVCC(nil, b, int(size))
		if err != nil {
			return
		}
		total := 0
		for _, u := range units {
			total += len(u) + int(size)
		}
		if total > len(b) {
			t.Fatalf("units cover %d bytes of a %d-byte buffer", total, len(b))
		}
	})
}
