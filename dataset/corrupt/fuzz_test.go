package corrupt

import (
	"strings"
	"testing"
)

// FuzzApply feeds arbitrary pixels, sizes, names and severities: Apply must
// either succeed keeping the size or return an error, never panic.
func FuzzApply(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6}, 2, 1, "fog", 3, uint64(1))
	f.Add([]byte{255, 0, 255}, 1, 1, "glass_blur", 5, uint64(2))
	f.Add(make([]byte, 3*9*2), 9, 2, "defocus_blur", 5, uint64(3))
	f.Add([]byte{}, 0, 0, "snow", 1, uint64(4))
	f.Add([]byte{9, 9, 9}, 1, 1, "nope", 1, uint64(5))
	f.Add(make([]byte, 3*3*7), 3, 7, "zoom_blur", 0, uint64(6))
	f.Fuzz(func(t *testing.T, pix []byte, w, h int, name string, severity int, seed uint64) {
		if w*h > 4096 || w*h < 0 { // keep iterations fast
			return
		}
		dst := make([]uint8, len(pix))
		err := Apply(dst, pix, w, h, name, severity, seed)
		valid := w > 0 && h > 0 && len(pix) == w*h*3 && severity >= 1 && severity <= 5
		known := false
		for _, n := range Names() {
			known = known || n == name
		}
		if valid && known && err != nil {
			t.Fatalf("valid input rejected: %v", err)
		}
		if (!valid || !known) && err == nil {
			t.Fatalf("invalid input accepted: %dx%d len %d %q %d", w, h, len(pix), name, severity)
		}
		if err != nil && !strings.Contains(err.Error(), "corruption") && !strings.Contains(err.Error(), "unknown") {
			t.Fatalf("error without context: %v", err)
		}
	})
}
