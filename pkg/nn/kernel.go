package nn

// The two micro-kernels every convolution, Linear and CosineSimilarity pass
// ends in, with their portable Go versions. The assembly versions
// (kernel_amd64.s: AVX2+FMA, kernel_arm64.s: NEON) compute the same sums in
// the same roles; the wrappers below check the bounds the assembly relies on
// and pick the assembly kernel when the CPU has it and the caller did not ask
// for the portable one (tests and the arm64 instruction-count comparison).
//
// tile kernel (4 × 24): C[i, j] (= or +=) Σ_l A[i, l] · B[l, j] for i < 4,
// j < 24, where A is packed as k groups of 4 values (A[0..3, l] at a[4l:4l+4])
// and row l of B is the 24 values at b[offs[l]:]. The offset table lets B rows
// be anywhere: consecutive rows of a row-major matrix (offs[l] = l·ldb), a
// packed panel (l·24), or shifted windows of a padded image (the implicit-GEMM
// convolution, offs[(c,kh,kw)] = c·plane + kh·d·pitch + kw·d), so that a
// stride-1 convolution never materializes its patch matrix.
//
// dot kernel (4 × 3): out[3i + j] = Σ_{t < 8n} a_i[t] · b_j[t], for the weight
// gradient, a sum over pixels of products of contiguous rows.
const (
	tileRows = 4
	tileCols = 24
	dotRows  = 4
	dotCols  = 3
	dotStep  = 8 // elements per dot-kernel iteration
)

// rowOffsets is an offset table for the tile kernel with its smallest and
// largest entries, so that a bounds check per call is O(1).
type rowOffsets struct {
	offs     []int
	min, max int
}

func (r *rowOffsets) set(offs []int) {
	r.offs = offs
	r.min, r.max = 0, 0
	for i, o := range offs {
		if i == 0 || o < r.min {
			r.min = o
		}
		r.max = max(r.max, o)
	}
}

// strided fills r with l·stride for l < k, reusing its storage.
func (r *rowOffsets) strided(k, stride int) {
	if cap(r.offs) < k {
		r.offs = make([]int, k)
	}
	r.offs = r.offs[:k]
	for l := range r.offs {
		r.offs[l] = l * stride
	}
	r.min, r.max = 0, max(0, (k-1)*stride)
}

// tile runs the tile kernel on k steps of the packed A panel a, the B rows
// b[offs[l]:], into the 4×24 block of c at row stride ldc, overwriting it
// unless acc. portable forces the Go kernel.
func tile(portable bool, k int, a, b []float32, offs *rowOffsets, c []float32, ldc int, acc bool) {
	if k == 0 {
		if !acc {
			for i := 0; i < tileRows; i++ {
				clear32(c[i*ldc : i*ldc+tileCols])
			}
		}
		return
	}
	// The bounds the kernel relies on (a failed check is a bug in the caller,
	// caught here by Go's own bounds check rather than as a stray write).
	_ = a[tileRows*k-1]
	_ = b[offs.min]
	_ = b[offs.max+tileCols-1]
	_ = offs.offs[k-1]
	_ = c[(tileRows-1)*ldc+tileCols-1]
	if haveKernel && !portable {
		accum := 0
		if acc {
			accum = 1
		}
		kernelTile(k, &a[0], &b[0], &offs.offs[0], &c[0], ldc, accum)
		return
	}
	tileGo(k, a, b, offs.offs, c, ldc, acc)
}

// tile2 is tile on two adjacent panels: C[0:4, 0:48] from B rows of 48
// values. Where the CPU has AVX-512 registers one kernel call covers both
// (the same sums, in the same order, as two calls of tile).
func tile2(portable bool, k int, a, b []float32, offs *rowOffsets, c []float32, ldc int, acc bool) {
	if k == 0 || !haveWide || portable {
		tile(portable, k, a, b, offs, c, ldc, acc)
		tile(portable, k, a, b[tileCols:], offs, c[tileCols:], ldc, acc)
		return
	}
	_ = a[tileRows*k-1]
	_ = b[offs.min]
	_ = b[offs.max+2*tileCols-1]
	_ = offs.offs[k-1]
	_ = c[(tileRows-1)*ldc+2*tileCols-1]
	accum := 0
	if acc {
		accum = 1
	}
	kernelTile48(k, &a[0], &b[0], &offs.offs[0], &c[0], ldc, accum)
}

// dot runs the dot kernel over 8·n8 elements of the rows a[i] and b[j] and
// writes the 12 sums to out (row-major, 4 × 3).
func dot(portable bool, n8 int, a *[dotRows][]float32, b *[dotCols][]float32, out *[dotRows * dotCols]float32) {
	if n8 == 0 {
		*out = [dotRows * dotCols]float32{}
		return
	}
	n := n8 * dotStep
	for i := range a {
		_ = a[i][n-1]
	}
	for j := range b {
		_ = b[j][n-1]
	}
	if haveKernel && !portable {
		kernelDot(n8, &a[0][0], &a[1][0], &a[2][0], &a[3][0], &b[0][0], &b[1][0], &b[2][0], &out[0])
		return
	}
	dotGo(n, a, b, out)
}

// dot6Runs adds to out, run after run, the dot kernel's sums of a against
// b[0:3] (out[0:12]) and b[3:6] (out[12:24]) over consecutive runs of 8·run8
// elements (the last one shorter) of 8·n8: for every k, out[k] =
// (((out[k] + run₀) + run₁) + …), the same additions as calling dot twice per
// run and adding its results to out. Only where haveWide (one kernel call).
func dot6Runs(n8, run8 int, a *[dotRows][]float32, b *[2 * dotCols][]float32, out *[2 * dotRows * dotCols]float32) {
	if n8 == 0 {
		return
	}
	n := n8 * dotStep
	for i := range a {
		_ = a[i][n-1]
	}
	for j := range b {
		_ = b[j][n-1]
	}
	kernelDot6Runs(n8, max(run8, 1), &a[0][0], &a[1][0], &a[2][0], &a[3][0], &b[0][0], &b[1][0], &b[2][0], &b[3][0], &b[4][0], &b[5][0], &out[0])
}

// tileGo is the portable tile kernel: 24-wide accumulator rows updated per
// step, the same sums as the assembly (in a different order of additions).
func tileGo(k int, a, b []float32, offs []int, c []float32, ldc int, acc bool) {
	var t [tileRows][tileCols]float32
	for l := 0; l < k; l++ {
		bl := b[offs[l] : offs[l]+tileCols]
		a0, a1, a2, a3 := a[4*l], a[4*l+1], a[4*l+2], a[4*l+3]
		for j, v := range bl {
			t[0][j] += a0 * v
			t[1][j] += a1 * v
			t[2][j] += a2 * v
			t[3][j] += a3 * v
		}
	}
	for i := range t {
		row := c[i*ldc : i*ldc+tileCols]
		if acc {
			for j, v := range t[i] {
				row[j] += v
			}
		} else {
			copy(row, t[i][:])
		}
	}
}

// dotGo is the portable dot kernel.
func dotGo(n int, a *[dotRows][]float32, b *[dotCols][]float32, out *[dotRows * dotCols]float32) {
	b0, b1, b2 := b[0][:n], b[1][:n], b[2][:n]
	for i := range a {
		ai := a[i][:n]
		var s0, s1, s2 float32
		for t, v := range ai {
			s0 += v * b0[t]
			s1 += v * b1[t]
			s2 += v * b2[t]
		}
		out[3*i], out[3*i+1], out[3*i+2] = s0, s1, s2
	}
}

// KernelName describes the micro-kernels this process runs, for reports:
// "amd64 AVX2+FMA", "arm64 NEON" or "portable Go".
func KernelName() string {
	if haveWide {
		return kernelArch + " (AVX-512 tile kernel)"
	}
	if haveKernel {
		return kernelArch
	}
	return "portable Go"
}

// reluCopy writes max(v, 0) (ReLU.Forward's expression) of each src value
// to dst, which is at least as long: 8 values at a time in kernelReLU
// where it runs, bit-identical to the Go loop (TestReLUCopy).
func reluCopy(portable bool, dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if haveElementwise && !portable && len(src) >= 8 {
		n = len(src) &^ 7
		kernelReLU(&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = max(src[i], 0)
	}
}

// deinterleave2 writes the even columns of row to even and the odd ones to
// odd (lengths ⌈len(row)/2⌉ and ⌊len(row)/2⌋): 8 of each at a time in
// kernelDeinterleave2 where it runs.
func deinterleave2(even, odd, row []float32, portable bool) {
	n := 0
	if haveElementwise && !portable && len(odd) >= 8 {
		n = len(odd) &^ 7
		kernelDeinterleave2(&even[0], &odd[0], &row[0], n)
	}
	for k := n; k < len(even); k++ {
		even[k] = row[2*k]
	}
	for k := n; k < len(odd); k++ {
		odd[k] = row[2*k+1]
	}
}
