//go:build !nolibav

package h264

import (
	"testing"
)

// TestEncodeDecodeRoundTrip encodes a smooth picture with libx264 and
// decodes it back: the first access unit is an IDR with SPS and PPS, and the
// picture survives within codec tolerance.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	const w, h = 128, 64
	enc, err := NewEncoder(EncoderConfig{Width: w, Height: h, FPS: 15, GOP: 5})
	if err != nil {
		t.Fatalf("no libx264 in libavcodec (Debian's has it): %v", err)
	}
	defer enc.Close()
	dec, err := NewDecoder(H264)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	rgb := make([]uint8, w*h*3)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := 3 * (y*w + x)
			rgb[i], rgb[i+1], rgb[i+2] = uint8(2*x), uint8(4*y), 128
		}
	}
	var au []byte
	var units [][]byte
	var out []uint8
	idrs := 0
	for n := 0; n < 10; n++ {
		if au, err = enc.Encode(rgb, au); err != nil {
			t.Fatal(err)
		}
		if units, err = SplitAnnexB(units[:0], au); err != nil || len(units) == 0 {
			t.Fatalf("frame %d: access unit of %d bytes: %v", n, len(au), err)
		}
		types := map[byte]bool{}
		for _, u := range units {
			types[u[0]&0x1f] = true
		}
		if types[5] {
			idrs++
			if !types[7] || !types[8] {
				t.Errorf("frame %d: IDR without SPS/PPS (NAL types %v)", n, types)
			}
		}
		if n == 0 && !types[5] {
			t.Fatalf("first access unit is not an IDR (NAL types %v)", types)
		}
		var ok bool
		out, _, _, ok, err = dec.Decode(units, out)
		if err != nil || !ok {
			t.Fatalf("frame %d: decode ok=%v err=%v", n, ok, err)
		}
	}
	if idrs != 2 {
		t.Errorf("%d IDR pictures in 10 frames with GOP 5, want 2", idrs)
	}
	if mae := meanAbsDiff(out, rgb); mae > 3 {
		t.Errorf("round trip mean abs diff %.2f > 3", mae)
	}
	if _, err := enc.Encode(rgb[:10], au); err == nil {
		t.Error("short picture accepted")
	}
	if _, err := NewEncoder(EncoderConfig{Width: 15, Height: 8, FPS: 15}); err == nil {
		t.Error("odd width accepted")
	}
}
