package nn

import (
	"math"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// sameBits fails unless got and want hold the same float32 bit patterns.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d is %v, want %v (bit-identical)", what, i, got[i], want[i])
		}
	}
}

// unfused runs the layers one by one, each through its own Forward: the
// reference the fused Sequential must equal bit for bit.
func unfused(t *testing.T, layers []Layer, x *tensor.Dense, mode Mode) []float32 {
	t.Helper()
	var err error
	for i, l := range layers {
		if x, err = l.Forward(x, mode); err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
	}
	return append([]float32(nil), Data(x)...)
}

func TestSequentialFusesConvReLU(t *testing.T) {
	for _, workers := range []int{1, 2} {
		rng := testRNG(11)
		conv := func(in, out, s, p, d int) *Conv2d {
			c, err := NewConv2d(Conv2dConfig{In: in, Out: out, Kernel: 3, Stride: s, Padding: p, Dilation: d, Bias: true}, rng)
			if err != nil {
				t.Fatal(err)
			}
			c.SetWorkers(workers)
			return c
		}
		// Odd channel counts, a strided and a dilated layer, ReLU pairs and
		// a conv without one, a ReLU after a non-conv layer.
		relu1, relu2 := &ReLU{}, &ReLU{}
		seq := &Sequential{Layers: []Layer{conv(3, 5, 1, 1, 1), relu1, conv(5, 7, 2, 1, 1), relu2, conv(7, 6, 1, 2, 2), &Upsample{Factor: 2}, &ReLU{}, conv(6, 3, 1, 1, 1)}}
		x := randDense(testRNG(12), -1, 1, 2, 3, 13, 22)
		for _, mode := range []Mode{Eval, MonteCarlo} {
			want := unfused(t, seq.Layers, x, mode)
			y, err := seq.Forward(x, mode)
			if err != nil {
				t.Fatal(err)
			}
			sameBits(t, "fused Sequential", Data(y), want)
		}
		// The skipped ReLU has no Forward to go back through.
		if _, err := relu1.Backward(NewDense(2, 5, 13, 22)); err == nil {
			t.Error("Backward of a ReLU fused into its convolution: no error")
		}
		// Training runs every layer: the ReLU's Backward works again.
		y, err := seq.Forward(x, Train)
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, "Train-mode Sequential", Data(y), unfused(t, seq.Layers, x, Eval))
		dy := randDense(testRNG(13), -1, 1, y.Shape()...)
		if _, err := seq.Backward(dy); err != nil {
			t.Fatalf("Backward after a Train Forward: %v", err)
		}
	}
}

func TestForwardConcatEqualsUpsampleConcat(t *testing.T) {
	for _, tc := range []struct {
		name            string
		n, c1, c2, h, w int
		factor, workers int
		k, pad, dil     int
	}{
		{"decoder shape", 2, 6, 5, 6, 10, 2, 1, 3, 1, 1},
		{"two workers", 2, 6, 5, 6, 10, 2, 2, 3, 1, 1},
		{"factor 3, 1x1 kernel", 1, 3, 4, 5, 7, 3, 2, 1, 0, 1},
		{"one row, dilation 2", 3, 9, 1, 1, 9, 2, 2, 3, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := testRNG(21)
			in := tc.c1 + tc.c2
			conv, err := NewConv2d(Conv2dConfig{In: in, Out: 7, Kernel: tc.k, Padding: tc.pad, Dilation: tc.dil, Bias: true}, rng)
			if err != nil {
				t.Fatal(err)
			}
			conv.SetWorkers(tc.workers)
			seq := &Sequential{Layers: []Layer{conv, &ReLU{}, &Dropout{P: 0.5}}}
			low := randDense(testRNG(22), -2, 2, tc.n, tc.c1, tc.h, tc.w)
			skip := randDense(testRNG(23), -2, 2, tc.n, tc.c2, tc.h*tc.factor, tc.w*tc.factor)

			// Reference: the layers one by one on the upsampled, concatenated tensor.
			refUp := &Upsample{Factor: tc.factor}
			u, err := refUp.Forward(low, Eval)
			if err != nil {
				t.Fatal(err)
			}
			var cat Concat
			cx, err := cat.Forward([]*tensor.Dense{u, skip})
			if err != nil {
				t.Fatal(err)
			}
			want := unfused(t, seq.Layers, cx, Eval)

			up := &Upsample{Factor: tc.factor}
			for range 2 { // twice: buffers reused
				y, err := seq.ForwardConcat(Eval, ConvInput{X: low, Up: up}, ConvInput{X: skip})
				if err != nil {
					t.Fatal(err)
				}
				sameBits(t, "ForwardConcat", Data(y), want)
			}
			allocs := testing.AllocsPerRun(5, func() {
				if _, err := seq.ForwardConcat(Eval, ConvInput{X: low, Up: up}, ConvInput{X: skip}); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("ForwardConcat allocates %v times per call in steady state, want 0", allocs)
			}
			// Plain Forward on the concatenated tensor afterwards still works.
			y, err := seq.Forward(cx, Eval)
			if err != nil {
				t.Fatal(err)
			}
			sameBits(t, "Forward after ForwardConcat", Data(y), want)
		})
	}
}

func TestForwardConcatErrors(t *testing.T) {
	conv, err := NewConv2d(Conv2dConfig{In: 5, Out: 2, Kernel: 3, Padding: 1, Bias: true}, testRNG(31))
	if err != nil {
		t.Fatal(err)
	}
	strided, err := NewConv2d(Conv2dConfig{In: 5, Out: 2, Kernel: 3, Stride: 2, Padding: 1}, testRNG(32))
	if err != nil {
		t.Fatal(err)
	}
	seq := &Sequential{Layers: []Layer{conv, &ReLU{}}}
	low := NewDense(1, 3, 4, 4)
	skip := NewDense(1, 2, 8, 8)
	up := &Upsample{Factor: 2}
	for _, tc := range []struct {
		name  string
		seq   *Sequential
		mode  Mode
		parts []ConvInput
		want  string
	}{
		{"train", seq, Train, []ConvInput{{X: low, Up: up}, {X: skip}}, "inference only"},
		{"not a conv first", &Sequential{Layers: []Layer{&ReLU{}}}, Eval, []ConvInput{{X: skip}}, "want *nn.Conv2d"},
		{"no layers", &Sequential{}, Eval, []ConvInput{{X: skip}}, "no layers"},
		{"no parts", seq, Eval, nil, "no input"},
		{"size mismatch", seq, Eval, []ConvInput{{X: low}, {X: skip}}, "input part 1 is 1x8x8 after resizing, part 0 1x4x4"},
		{"channels", seq, Eval, []ConvInput{{X: low, Up: up}, {X: NewDense(1, 1, 8, 8)}}, "4 channels together, want 5"},
		{"stride", &Sequential{Layers: []Layer{strided}}, Eval, []ConvInput{{X: low, Up: up}, {X: skip}}, "needs stride 1"},
		{"factor", seq, Eval, []ConvInput{{X: low, Up: &Upsample{}}, {X: skip}}, "factor must be at least 1"},
		{"nil part", seq, Eval, []ConvInput{{X: low, Up: up}, {}}, "input part 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.seq.ForwardConcat(tc.mode, tc.parts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestReLUCopy checks the ReLU copy (kernelReLU where it runs) against
// Go's max(v, 0) bit for bit on every class of float32: NaNs of both
// signs and several payloads, ±Inf, ±0, subnormals, normal values, at
// every length up to 41 and at unaligned offsets.
func TestReLUCopy(t *testing.T) {
	special := []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0xffffffff,
		0x7f800000, 0xff800000, 0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x807fffff,
		0x3f800000, 0xbf800000, 0x7f7fffff, 0xff7fffff}
	rng := testRNG(41)
	src := make([]float32, 200)
	for i := range src {
		if i%3 == 0 {
			src[i] = math.Float32frombits(special[rng.IntN(len(special))])
			continue
		}
		src[i] = math.Float32frombits(rng.Uint32())
	}
	for off := 0; off < 3; off++ {
		for n := 0; n <= 41; n++ {
			s := src[off+n : off+2*n]
			for _, portable := range []bool{false, true} {
				dst := make([]float32, n+1)
				dst[n] = 42 // past the end: untouched
				reluCopy(portable, dst, s)
				for i, v := range s {
					if want := max(v, 0); math.Float32bits(dst[i]) != math.Float32bits(want) {
						t.Fatalf("offset %d, length %d, portable %v: value %d (bits %#x) -> %#x, want %#x",
							off, n, portable, i, math.Float32bits(v), math.Float32bits(dst[i]), math.Float32bits(want))
					}
				}
				if dst[n] != 42 {
					t.Fatalf("length %d: wrote past the end", n)
				}
			}
		}
	}
}

// TestUpsampleKernels checks Upsample's row kernels (kernelLerp,
// kernelWiden2 where they run) against the arithmetic they replace, bit
// for bit: the interpolation tables for the widening, the blend written
// out with each operation rounded, at widths around the 8-value blocks.
func TestUpsampleKernels(t *testing.T) {
	rng := testRNG(51)
	for w := 1; w <= 42; w++ {
		sr := make([]float32, w)
		for i := range sr {
			sr[i] = rng.Float32()*200 - 100
		}
		u := &Upsample{Factor: 2}
		halfPixelTable(w, 2, &u.colLo, &u.colHi, &u.colWt)
		got, want := make([]float32, 2*w+1), make([]float32, 2*w)
		got[2*w] = 42
		widen2(got[:2*w], sr)
		u.widen(want, sr)
		sameBits(t, "widen2", got[:2*w], want)
		if got[2*w] != 42 {
			t.Fatalf("w=%d: widen2 wrote past the row", w)
		}

		top, bot := make([]float32, w), make([]float32, w)
		for i := range top {
			top[i], bot[i] = rng.Float32()*20-10, rng.Float32()*20-10
		}
		for _, a := range []float32{0, 0.25, 0.75, 0.3} {
			out := make([]float32, w)
			lerp(out, top, bot, a)
			for j := range out {
				if want := top[j] + float32(a*(bot[j]-top[j])); math.Float32bits(out[j]) != math.Float32bits(want) {
					t.Fatalf("w=%d a=%v: lerp %d = %v, want %v", w, a, j, out[j], want)
				}
			}
		}
	}
}

// TestDeinterleave2 checks the stride-2 column split against its
// definition at every row length up to 41 (odd and even), kernel and Go.
func TestDeinterleave2(t *testing.T) {
	rng := testRNG(61)
	for w := 1; w <= 41; w++ {
		row := make([]float32, w)
		for i := range row {
			row[i] = math.Float32frombits(rng.Uint32())
		}
		for _, portable := range []bool{false, true} {
			even, odd := make([]float32, (w+1)/2+1), make([]float32, w/2+1)
			even[(w+1)/2], odd[w/2] = 42, 42
			deinterleave2(even[:(w+1)/2], odd[:w/2], row, portable)
			for k := range (w + 1) / 2 {
				if math.Float32bits(even[k]) != math.Float32bits(row[2*k]) {
					t.Fatalf("w=%d portable=%v: even %d", w, portable, k)
				}
			}
			for k := range w / 2 {
				if math.Float32bits(odd[k]) != math.Float32bits(row[2*k+1]) {
					t.Fatalf("w=%d portable=%v: odd %d", w, portable, k)
				}
			}
			if even[(w+1)/2] != 42 || odd[w/2] != 42 {
				t.Fatalf("w=%d: wrote past a phase", w)
			}
		}
	}
}
