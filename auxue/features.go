package auxue

// AuxFeatures computes the first four channels of aux_features
// (4,H/f,W/f) from the normalized image (3,H,W) and the predicted depth
// (H,W): block means over f x f, depth divided by maxDepth, as the exported
// graph does.
func AuxFeatures(img, depth []float32, height, width, f int, maxDepth float64, dst []float32) {
	hf, wf := height/f, width/f
	hw := height * width
	inv := float32(1 / maxDepth)
	norm := 1 / float32(f*f)
	for c := 0; c < 4; c++ {
		src, scale := depth, norm*inv
		if c < 3 {
			src, scale = img[c*hw:(c+1)*hw], norm
		}
		out := dst[c*hf*wf : (c+1)*hf*wf]
		for v := 0; v < hf; v++ {
			for u := 0; u < wf; u++ {
				var s float32
				for dv := 0; dv < f; dv++ {
					row := src[(f*v+dv)*width+f*u:]
					for du := 0; du < f; du++ {
						s += row[du]
					}
				}
				out[v*wf+u] = s * scale
			}
		}
	}
}

// BlockErrors turns full-resolution absolute errors |depth - gt| on the
// ground-truth pixels (gt > 0) into the AuxUE's targets at 1/f resolution:
// a block is valid when any of its pixels has ground truth, and its error is
// the mean over those pixels.
func BlockErrors(depth, gt []float32, height, width, f int, errs []float32, valid []bool) {
	hf, wf := height/f, width/f
	for v := 0; v < hf; v++ {
		for u := 0; u < wf; u++ {
			var s float32
			n := 0
			for dv := 0; dv < f; dv++ {
				for du := 0; du < f; du++ {
					i := (f*v+dv)*width + f*u + du
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
			j := v*wf + u
			valid[j] = n > 0
			errs[j] = 0
			if n > 0 {
				errs[j] = s / float32(n)
			}
		}
	}
}
