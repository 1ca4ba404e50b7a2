package argmax

// UpdateArgmax folds row c into a running argmax: for each i below the
// shortest of the three lengths, if z[i] > top[i] then top[i] = z[i] and
// cls[i] = c. The comparison is strict and false when either value is
// NaN, so over rows c = 0, 1, ... cls ends as the first row of the
// maximum, exactly as the loop below would leave it. It allocates
// nothing.
func UpdateArgmax(top []float32, cls []int32, z []float32, c int32) {
	n := min(len(top), len(cls), len(z))
	i := 0
	if haveArgmaxKernel && n >= blockLen {
		i = n &^ (blockLen - 1)
		updateArgmaxBlocks(&top[0], &cls[0], &z[0], i, c)
	}
	updateArgmaxScalar(top[i:n], cls[i:n], z[i:n], c)
}

// blockLen is the number of float32 lanes the kernel compares per step.
const blockLen = 8

// updateArgmaxScalar is the definition (top, cls and z of one length).
func updateArgmaxScalar(top []float32, cls []int32, z []float32, c int32) {
	cls, z = cls[:len(top)], z[:len(top)]
	for i, v := range z {
		if v > top[i] {
			top[i], cls[i] = v, c
		}
	}
}
