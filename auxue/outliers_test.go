package auxue

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The flip outlier reverses the rows of the content channels and leaves
// the row coordinate (channel 4) as it was.
func TestOutlierFlip(t *testing.T) {
	const c, h, w = 5, 3, 2
	feats := make([]float32, c*h*w)
	for i := range feats {
		feats[i] = float32(i)
	}
	MakeOutlier(OutlierFlip, feats, c, h, w, rand.New(rand.NewPCG(1, 2)), make([]float32, h*w))
	for ch := 0; ch < c; ch++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				srcY := h - 1 - y
				if ch >= auxImageChannels {
					srcY = y
				}
				want := float32(ch*h*w + srcY*w + x)
				if got := feats[ch*h*w+y*w+x]; got != want {
					t.Fatalf("channel %d (%d,%d) = %v, want %v", ch, y, x, got, want)
				}
			}
		}
	}
}

// The tiles outlier permutes the 16 tiles of a 4 x 4 grid, the same way in
// every content channel, and keeps every value.
func TestOutlierTiles(t *testing.T) {
	const c, h, w = 5, 8, 12 // tiles of 2 x 3
	feats := make([]float32, c*h*w)
	for ch := 0; ch < c; ch++ {
		for i := 0; i < h*w; i++ {
			feats[ch*h*w+i] = float32(ch*1000 + i)
		}
	}
	orig := slices.Clone(feats)
	MakeOutlier(OutlierTiles, feats, c, h, w, rand.New(rand.NewPCG(3, 4)), make([]float32, h*w))
	if slices.Equal(feats[:h*w], orig[:h*w]) {
		t.Fatal("tiles left the frame unchanged")
	}
	for ch := 0; ch < c; ch++ {
		got, want := slices.Clone(feats[ch*h*w:(ch+1)*h*w]), slices.Clone(orig[ch*h*w:(ch+1)*h*w])
		if ch >= auxImageChannels {
			if !slices.Equal(got, want) {
				t.Fatalf("channel %d (not content) changed", ch)
			}
			continue
		}
		for i := range got { // same permutation as channel 0
			if got[i]-float32(ch*1000) != feats[i] {
				t.Fatalf("channel %d element %d = %v, channel 0 has %v: permutations differ", ch, i, got[i], feats[i])
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("channel %d: values not preserved", ch)
		}
	}
	// Each 2 x 3 tile moves as a block: its top-left source value fixes the rest.
	for ty := 0; ty < h; ty += 2 {
		for tx := 0; tx < w; tx += 3 {
			base := feats[ty*w+tx]
			for y := 0; y < 2; y++ {
				for x := 0; x < 3; x++ {
					if feats[(ty+y)*w+tx+x] != base+float32(y*w+x) {
						t.Fatalf("tile at (%d,%d) is not a whole source tile", ty, tx)
					}
				}
			}
		}
	}
}

// MaybeOutlier marks every block of a replaced item as without ground
// truth and leaves an item it does not replace untouched.
func TestMaybeOutlier(t *testing.T) {
	const c, h, w = 4, 4, 4
	feats := make([]float32, c*h*w)
	for i := range feats {
		feats[i] = float32(i)
	}
	valid, bins := make([]bool, h*w), make([]int32, h*w)
	for i := range valid {
		valid[i], bins[i] = true, int32(i%3)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	if MaybeOutlier(rng, 0, []OutlierKind{OutlierFlip}, feats, c, h, w, valid, bins, make([]float32, h*w)) {
		t.Fatal("fraction 0 replaced an item")
	}
	if !valid[0] || bins[1] != 1 || feats[0] != 0 {
		t.Fatal("fraction 0 changed the item")
	}
	if !MaybeOutlier(rng, 0.999999, []OutlierKind{OutlierFlip}, feats, c, h, w, valid, bins, make([]float32, h*w)) {
		t.Fatal("fraction ~1 did not replace the item")
	}
	for i := range valid {
		if valid[i] || bins[i] != -1 {
			t.Fatalf("block %d still labeled (valid %v, bin %d)", i, valid[i], bins[i])
		}
	}
	if feats[0] != float32((h-1)*w) {
		t.Fatalf("features not flipped: first value %v", feats[0])
	}
}

func TestParseOutlierKinds(t *testing.T) {
	tests := []struct {
		in      string
		want    []OutlierKind
		wantErr string
	}{
		{"flip,tiles", []OutlierKind{OutlierFlip, OutlierTiles}, ""},
		{" tiles ", []OutlierKind{OutlierTiles}, ""},
		{"", nil, ""},
		{"flip,fog", nil, `outlier kind "fog"`},
	}
	for _, tc := range tests {
		got, err := ParseOutlierKinds(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseOutlierKinds(f *testing.F) {
	for _, s := range []string{"flip,tiles", "", ",,", "tiles,x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kinds, err := ParseOutlierKinds(s)
		if err != nil {
			return
		}
		for _, k := range kinds {
			if k != OutlierFlip && k != OutlierTiles {
				t.Fatalf("%q: accepted kind %q", s, k)
			}
		}
	})
}

// TestMaybeOutlierKeep: on a contract of image, depth and row channels
// (keep = 4, the row) it draws and rewrites exactly what MaybeOutlier does
// (the default recipe's outliers are unchanged for the reference AuxUE);
// with the main model's channels after the row they move with the image
// (here flipped: row y of channel 6 holds what row h-1-y held) while the
// row channel stays.
func TestMaybeOutlierKeep(t *testing.T) {
	const h, w = 8, 8
	fill := func(c int) []float32 {
		f := make([]float32, c*h*w)
		for i := range f {
			f[i] = float32(i)
		}
		return f
	}
	kinds := []OutlierKind{OutlierFlip, OutlierTiles}
	for _, keep := range []int{4, -1} {
		c := 5
		if keep < 0 {
			c = 4
		}
		a, b := fill(c), fill(c)
		ra, rb := rand.New(rand.NewPCG(7, 8)), rand.New(rand.NewPCG(7, 8))
		for k := 0; k < 40; k++ {
			va, vb := make([]bool, h*w), make([]bool, h*w)
			ba, bb := make([]int32, h*w), make([]int32, h*w)
			da := MaybeOutlier(ra, 0.5, kinds, a, c, h, w, va, ba, make([]float32, h*w))
			db := MaybeOutlierKeep(rb, 0.5, kinds, b, c, h, w, keep, vb, bb, make([]float32, h*w))
			if da != db || !reflect.DeepEqual(a, b) || !reflect.DeepEqual(ba, bb) {
				t.Fatalf("keep %d draw %d: MaybeOutlierKeep differs from MaybeOutlier", keep, k)
			}
		}
	}
	const c = 7
	f := fill(c)
	orig := fill(c)
	scratch := make([]float32, h*w)
	rng := rand.New(rand.NewPCG(1, 1))
	if !MaybeOutlierKeep(rng, 0.999999, []OutlierKind{OutlierFlip}, f, c, h, w, 4, make([]bool, h*w), make([]int32, h*w), scratch) {
		t.Fatal("not replaced")
	}
	for ch := 0; ch < c; ch++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				want := orig[(ch*h+h-1-y)*w+x]
				if ch == 4 {
					want = orig[(ch*h+y)*w+x]
				}
				if got := f[(ch*h+y)*w+x]; got != want {
					t.Fatalf("channel %d (%d,%d): %v, want %v", ch, y, x, got, want)
				}
			}
		}
	}
}
