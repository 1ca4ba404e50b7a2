package corrupt

import "testing"

// BenchmarkCorrupt times each corruption at severity 3 on a 640x192 frame
// (KITTI-like aspect) with a reused Corruptor.
func BenchmarkCorrupt(b *testing.B) {
	const w, h = 640, 192
	src := roadScene(w, h)
	dst := make([]uint8, len(src))
	for _, name := range Names() {
		b.Run(name, func(b *testing.B) {
			c := NewCorruptor()
			if err := c.Apply(dst, src, w, h, name, 3, 1); err != nil { // warm the scratch
				b.Fatal(err)
			}
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := c.Apply(dst, src, w, h, name, 3, uint64(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
