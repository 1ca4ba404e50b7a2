package eval

// The AuxUE's half-resolution input and targets, defined as the exported
// runtime AuxUE defines them (auxue/depthnet: AuxFeatures, HalfResErrors,
// factor 2). They are kept here, not called from depthnet, because that
// package's helpers were changing signature while this protocol was written;
// TestHalfResolutionFeatures pins the definition with a hand-computed case.

// auxFeatures writes the 2x2 block means of the normalized image (3,H,W) and
// of depth/maxDepth (H,W) into dst (4,H/2,W/2).
func auxFeatures(img, depth []float32, height, width int, dst []float32) {
	h2, w2 := height/2, width/2
	hw := height * width
	for c := 0; c < auxChannels; c++ {
		src, scale := depth, float32(0.25/maxDepth)
		if c < 3 {
			src, scale = img[c*hw:(c+1)*hw], 0.25
		}
		out := dst[c*h2*w2 : (c+1)*h2*w2]
		for v := 0; v < h2; v++ {
			r0, r1 := src[2*v*width:], src[(2*v+1)*width:]
			for u := 0; u < w2; u++ {
				out[v*w2+u] = (r0[2*u] + r0[2*u+1] + r1[2*u] + r1[2*u+1]) * scale
			}
		}
	}
}

// halfResErrors turns |depth - gt| on ground-truth pixels (gt > 0) into
// half-resolution targets: a 2x2 block is valid when any of its pixels has
// ground truth, and its error is the mean over those pixels.
func halfResErrors(depth, gt []float32, height, width int, errs []float32, valid []bool) {
	h2, w2 := height/2, width/2
	for v := 0; v < h2; v++ {
		for u := 0; u < w2; u++ {
			var s float32
			n := 0
			for dv := 0; dv < 2; dv++ {
				for du := 0; du < 2; du++ {
					i := (2*v+dv)*width + 2*u + du
					if y := gt[i]; y > 0 {
						e := depth[i] - y
						if e < 0 {
							e = -e
						}
						s += e
						n++
					}
				}
			}
			j := v*w2 + u
			valid[j], errs[j] = n > 0, 0
			if n > 0 {
				errs[j] = s / float32(n)
			}
		}
	}
}
