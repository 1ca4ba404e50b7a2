#include "textflag.h"

// func kernelTile(k int, a, b *float32, offs *int, c *float32, ldc int, acc int)
//
// C[0:4, 0:24] (+)= A·B. A: k groups of 4 values (SI); B row l: 24 values at
// b + offs[l] elements (DI, BX); C row stride ldc elements (DX, R8).
// Accumulators Y0..Y11 (row i in Y(3i), Y(3i+1), Y(3i+2)); Y12..Y14 hold the
// B row, Y15 the broadcast A value. Per step: 3 loads of B, 4 broadcasts,
// 12 FMAs; two steps per iteration.
TEXT ·kernelTile(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ offs+24(FP), BX
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R8
	SHLQ $2, R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	MOVQ CX, R9
	SHRQ $1, R9
	JE   tail
loop2:
	MOVQ 0(BX), AX
	VMOVUPS (DI)(AX*4), Y12
	VMOVUPS 32(DI)(AX*4), Y13
	VMOVUPS 64(DI)(AX*4), Y14
	VBROADCASTSS 0(SI), Y15
	VFMADD231PS Y12, Y15, Y0
	VFMADD231PS Y13, Y15, Y1
	VFMADD231PS Y14, Y15, Y2
	VBROADCASTSS 4(SI), Y15
	VFMADD231PS Y12, Y15, Y3
	VFMADD231PS Y13, Y15, Y4
	VFMADD231PS Y14, Y15, Y5
	VBROADCASTSS 8(SI), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VFMADD231PS Y14, Y15, Y8
	VBROADCASTSS 12(SI), Y15
	VFMADD231PS Y12, Y15, Y9
	VFMADD231PS Y13, Y15, Y10
	VFMADD231PS Y14, Y15, Y11
	MOVQ 8(BX), R10
	VMOVUPS (DI)(R10*4), Y12
	VMOVUPS 32(DI)(R10*4), Y13
	VMOVUPS 64(DI)(R10*4), Y14
	VBROADCASTSS 16(SI), Y15
	VFMADD231PS Y12, Y15, Y0
	VFMADD231PS Y13, Y15, Y1
	VFMADD231PS Y14, Y15, Y2
	VBROADCASTSS 20(SI), Y15
	VFMADD231PS Y12, Y15, Y3
	VFMADD231PS Y13, Y15, Y4
	VFMADD231PS Y14, Y15, Y5
	VBROADCASTSS 24(SI), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VFMADD231PS Y14, Y15, Y8
	VBROADCASTSS 28(SI), Y15
	VFMADD231PS Y12, Y15, Y9
	VFMADD231PS Y13, Y15, Y10
	VFMADD231PS Y14, Y15, Y11
	ADDQ $32, SI
	ADDQ $16, BX
	DECQ R9
	JNE  loop2
tail:
	TESTQ $1, CX
	JE    store
	MOVQ 0(BX), AX
	VMOVUPS (DI)(AX*4), Y12
	VMOVUPS 32(DI)(AX*4), Y13
	VMOVUPS 64(DI)(AX*4), Y14
	VBROADCASTSS 0(SI), Y15
	VFMADD231PS Y12, Y15, Y0
	VFMADD231PS Y13, Y15, Y1
	VFMADD231PS Y14, Y15, Y2
	VBROADCASTSS 4(SI), Y15
	VFMADD231PS Y12, Y15, Y3
	VFMADD231PS Y13, Y15, Y4
	VFMADD231PS Y14, Y15, Y5
	VBROADCASTSS 8(SI), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VFMADD231PS Y14, Y15, Y8
	VBROADCASTSS 12(SI), Y15
	VFMADD231PS Y12, Y15, Y9
	VFMADD231PS Y13, Y15, Y10
	VFMADD231PS Y14, Y15, Y11
store:
	MOVQ acc+48(FP), AX
	TESTQ AX, AX
	JE   overwrite
	VADDPS (DX), Y0, Y0
	VADDPS 32(DX), Y1, Y1
	VADDPS 64(DX), Y2, Y2
	ADDQ R8, DX
	VADDPS (DX), Y3, Y3
	VADDPS 32(DX), Y4, Y4
	VADDPS 64(DX), Y5, Y5
	ADDQ R8, DX
	VADDPS (DX), Y6, Y6
	VADDPS 32(DX), Y7, Y7
	VADDPS 64(DX), Y8, Y8
	ADDQ R8, DX
	VADDPS (DX), Y9, Y9
	VADDPS 32(DX), Y10, Y10
	VADDPS 64(DX), Y11, Y11
	MOVQ c+32(FP), DX
overwrite:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	ADDQ R8, DX
	VMOVUPS Y3, (DX)
	VMOVUPS Y4, 32(DX)
	VMOVUPS Y5, 64(DX)
	ADDQ R8, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	VMOVUPS Y8, 64(DX)
	ADDQ R8, DX
	VMOVUPS Y9, (DX)
	VMOVUPS Y10, 32(DX)
	VMOVUPS Y11, 64(DX)
	VZEROUPPER
	RET

// func kernelDot(n8 int, a0, a1, a2, a3, b0, b1, b2, out *float32)
//
// out[3i+j] = Σ_{t<8·n8} a_i[t]·b_j[t]. Accumulators Y0..Y11 (Y(3i+j)),
// Y12..Y14 the b rows, Y15 the a row; the 12 vectors are reduced with
// horizontal adds into 3 groups of 4 sums at the end.
TEXT ·kernelDot(SB), NOSPLIT, $0-72
	MOVQ n8+0(FP), CX
	MOVQ a0+8(FP), SI
	MOVQ a1+16(FP), DI
	MOVQ a2+24(FP), R8
	MOVQ a3+32(FP), R9
	MOVQ b0+40(FP), R10
	MOVQ b1+48(FP), R11
	MOVQ b2+56(FP), R12
	MOVQ out+64(FP), DX
	XORQ AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
dotloop:
	VMOVUPS (R10)(AX*1), Y12
	VMOVUPS (R11)(AX*1), Y13
	VMOVUPS (R12)(AX*1), Y14
	VMOVUPS (SI)(AX*1), Y15
	VFMADD231PS Y12, Y15, Y0
	VFMADD231PS Y13, Y15, Y1
	VFMADD231PS Y14, Y15, Y2
	VMOVUPS (DI)(AX*1), Y15
	VFMADD231PS Y12, Y15, Y3
	VFMADD231PS Y13, Y15, Y4
	VFMADD231PS Y14, Y15, Y5
	VMOVUPS (R8)(AX*1), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VFMADD231PS Y14, Y15, Y8
	VMOVUPS (R9)(AX*1), Y15
	VFMADD231PS Y12, Y15, Y9
	VFMADD231PS Y13, Y15, Y10
	VFMADD231PS Y14, Y15, Y11
	ADDQ $32, AX
	DECQ CX
	JNE  dotloop
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (DX)
	VHADDPS Y5, Y4, Y4
	VHADDPS Y7, Y6, Y6
	VHADDPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS X5, X4, X4
	VMOVUPS X4, 16(DX)
	VHADDPS Y9, Y8, Y8
	VHADDPS Y11, Y10, Y10
	VHADDPS Y10, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VADDPS X9, X8, X8
	VMOVUPS X8, 32(DX)
	VZEROUPPER
	RET

// func kernelTile48(k int, a, b *float32, offs *int, c *float32, ldc int, acc int)
//
// The tile kernel on two adjacent panels, C[0:4, 0:48], with AVX-512
// registers: accumulators Z0..Z11 (row i in Z(3i)..Z(3i+2)), the B row in
// Z12..Z14, the broadcast A value in Z15. Every element of C is the same
// chain of FMAs in the same order as in kernelTile, so the results are
// identical; per step it issues 3 loads of B, 4 broadcasts and 12 FMAs for
// twice the columns.
TEXT ·kernelTile48(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ offs+24(FP), BX
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R8
	SHLQ $2, R8
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	TESTQ CX, CX
	JE   store48
loop48:
	MOVQ (BX), AX
	VMOVUPS (DI)(AX*4), Z12
	VMOVUPS 64(DI)(AX*4), Z13
	VMOVUPS 128(DI)(AX*4), Z14
	VBROADCASTSS 0(SI), Z15
	VFMADD231PS Z12, Z15, Z0
	VFMADD231PS Z13, Z15, Z1
	VFMADD231PS Z14, Z15, Z2
	VBROADCASTSS 4(SI), Z15
	VFMADD231PS Z12, Z15, Z3
	VFMADD231PS Z13, Z15, Z4
	VFMADD231PS Z14, Z15, Z5
	VBROADCASTSS 8(SI), Z15
	VFMADD231PS Z12, Z15, Z6
	VFMADD231PS Z13, Z15, Z7
	VFMADD231PS Z14, Z15, Z8
	VBROADCASTSS 12(SI), Z15
	VFMADD231PS Z12, Z15, Z9
	VFMADD231PS Z13, Z15, Z10
	VFMADD231PS Z14, Z15, Z11
	ADDQ $16, SI
	ADDQ $8, BX
	DECQ CX
	JNE  loop48
store48:
	MOVQ acc+48(FP), AX
	TESTQ AX, AX
	JE   overwrite48
	VADDPS (DX), Z0, Z0
	VADDPS 64(DX), Z1, Z1
	VADDPS 128(DX), Z2, Z2
	ADDQ R8, DX
	VADDPS (DX), Z3, Z3
	VADDPS 64(DX), Z4, Z4
	VADDPS 128(DX), Z5, Z5
	ADDQ R8, DX
	VADDPS (DX), Z6, Z6
	VADDPS 64(DX), Z7, Z7
	VADDPS 128(DX), Z8, Z8
	ADDQ R8, DX
	VADDPS (DX), Z9, Z9
	VADDPS 64(DX), Z10, Z10
	VADDPS 128(DX), Z11, Z11
	MOVQ c+32(FP), DX
overwrite48:
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	ADDQ R8, DX
	VMOVUPS Z3, (DX)
	VMOVUPS Z4, 64(DX)
	VMOVUPS Z5, 128(DX)
	ADDQ R8, DX
	VMOVUPS Z6, (DX)
	VMOVUPS Z7, 64(DX)
	VMOVUPS Z8, 128(DX)
	ADDQ R8, DX
	VMOVUPS Z9, (DX)
	VMOVUPS Z10, 64(DX)
	VMOVUPS Z11, 128(DX)
	VZEROUPPER
	RET

// func kernelDot6Runs(n8, run8 int, a0, a1, a2, a3, b0, b1, b2, b3, b4, b5, out *float32)
//
// Two dot kernels sharing the a rows, over 8·n8 elements in runs of 8·run8
// (the last run shorter), with AVX-512VL's 32 ymm registers: accumulators of
// b0..b2 in Y0..Y11 as in kernelDot, of b3..b5 in Y16..Y27; the b rows in
// Y12..Y14 and Y28..Y30, the a row in Y15 (10 loads per 24 FMAs instead of
// 14 for two kernelDot steps). At the end of each run the 24 sums are reduced
// exactly as in kernelDot (Y16..Y27 moved down first) and added to out
// (out[k] = out[k] + run sum, run after run): the same float32 additions as
// a caller adding each run's kernelDot results to out, without a call and a
// scatter per run.
TEXT ·kernelDot6Runs(SB), NOSPLIT, $0-104
	MOVQ n8+0(FP), CX
	MOVQ a0+16(FP), SI
	MOVQ a1+24(FP), DI
	MOVQ a2+32(FP), R8
	MOVQ a3+40(FP), R9
	MOVQ b0+48(FP), R10
	MOVQ b1+56(FP), R11
	MOVQ b2+64(FP), R12
	MOVQ b3+72(FP), R13
	MOVQ b4+80(FP), BX
	MOVQ b5+88(FP), DX
	XORQ AX, AX
runs6:
	MOVQ run8+8(FP), R14
	CMPQ R14, CX
	CMOVQGT CX, R14
	SUBQ R14, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	VPXORD Y18, Y18, Y18
	VPXORD Y19, Y19, Y19
	VPXORD Y20, Y20, Y20
	VPXORD Y21, Y21, Y21
	VPXORD Y22, Y22, Y22
	VPXORD Y23, Y23, Y23
	VPXORD Y24, Y24, Y24
	VPXORD Y25, Y25, Y25
	VPXORD Y26, Y26, Y26
	VPXORD Y27, Y27, Y27
runloop6:
	VMOVUPS (R10)(AX*1), Y12
	VMOVUPS (R11)(AX*1), Y13
	VMOVUPS (R12)(AX*1), Y14
	VMOVUPS (R13)(AX*1), Y28
	VMOVUPS (BX)(AX*1), Y29
	VMOVUPS (DX)(AX*1), Y30
	VMOVUPS (SI)(AX*1), Y15
	VFMADD231PS Y12, Y15, Y0
	VFMADD231PS Y13, Y15, Y1
	VFMADD231PS Y14, Y15, Y2
	VFMADD231PS Y28, Y15, Y16
	VFMADD231PS Y29, Y15, Y17
	VFMADD231PS Y30, Y15, Y18
	VMOVUPS (DI)(AX*1), Y15
	VFMADD231PS Y12, Y15, Y3
	VFMADD231PS Y13, Y15, Y4
	VFMADD231PS Y14, Y15, Y5
	VFMADD231PS Y28, Y15, Y19
	VFMADD231PS Y29, Y15, Y20
	VFMADD231PS Y30, Y15, Y21
	VMOVUPS (R8)(AX*1), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VFMADD231PS Y14, Y15, Y8
	VFMADD231PS Y28, Y15, Y22
	VFMADD231PS Y29, Y15, Y23
	VFMADD231PS Y30, Y15, Y24
	VMOVUPS (R9)(AX*1), Y15
	VFMADD231PS Y12, Y15, Y9
	VFMADD231PS Y13, Y15, Y10
	VFMADD231PS Y14, Y15, Y11
	VFMADD231PS Y28, Y15, Y25
	VFMADD231PS Y29, Y15, Y26
	VFMADD231PS Y30, Y15, Y27
	ADDQ $32, AX
	DECQ R14
	JNE  runloop6
	MOVQ out+96(FP), R15
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VADDPS 0(R15), X0, X0
	VMOVUPS X0, 0(R15)
	VHADDPS Y5, Y4, Y4
	VHADDPS Y7, Y6, Y6
	VHADDPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS X5, X4, X4
	VADDPS 16(R15), X4, X4
	VMOVUPS X4, 16(R15)
	VHADDPS Y9, Y8, Y8
	VHADDPS Y11, Y10, Y10
	VHADDPS Y10, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VADDPS X9, X8, X8
	VADDPS 32(R15), X8, X8
	VMOVUPS X8, 32(R15)
	VMOVAPS Y16, Y0
	VMOVAPS Y17, Y1
	VMOVAPS Y18, Y2
	VMOVAPS Y19, Y3
	VMOVAPS Y20, Y4
	VMOVAPS Y21, Y5
	VMOVAPS Y22, Y6
	VMOVAPS Y23, Y7
	VMOVAPS Y24, Y8
	VMOVAPS Y25, Y9
	VMOVAPS Y26, Y10
	VMOVAPS Y27, Y11
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VADDPS 48(R15), X0, X0
	VMOVUPS X0, 48(R15)
	VHADDPS Y5, Y4, Y4
	VHADDPS Y7, Y6, Y6
	VHADDPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS X5, X4, X4
	VADDPS 64(R15), X4, X4
	VMOVUPS X4, 64(R15)
	VHADDPS Y9, Y8, Y8
	VHADDPS Y11, Y10, Y10
	VHADDPS Y10, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VADDPS X9, X8, X8
	VADDPS 80(R15), X8, X8
	VMOVUPS X8, 80(R15)
	TESTQ CX, CX
	JNE  runs6
	VZEROUPPER
	RET

// func kernelReLU(dst, src *float32, n int)
//
// dst[i] = max(src[i], 0) for n a multiple of 8, bit for bit as Go
// compiles max on amd64, which is −min(−v, −0) by two MINSS and an OR:
// with v' = v ^ sign and z' = −0, m1 = v' < z' ? v' : z', m2 = m1 < v' ?
// m1 : v', result (m1 | m2) ^ sign. For ordered v this is max(v, 0) with
// +0 for ±0; a NaN comes back with its sign bit cleared. The same steps
// on 8 lanes (VMINPS keeps MINSS's operand rule) give the same bits.
TEXT ·kernelReLU(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         $0x80000000, AX
	MOVD         AX, X14
	VPBROADCASTD X14, Y14
	XORQ         AX, AX

reluLoop:
	CMPQ    AX, CX
	JGE     reluDone
	VXORPS  (SI)(AX*4), Y14, Y0
	VMINPS  Y14, Y0, Y1
	VMINPS  Y0, Y1, Y2
	VORPS   Y1, Y2, Y2
	VXORPS  Y14, Y2, Y2
	VMOVUPS Y2, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     reluLoop

reluDone:
	VZEROUPPER
	RET

// func kernelLerp(out, top, bot *float32, a float32, n int)
//
// out[j] = top[j] + a·(bot[j] − top[j]) for n a multiple of 8: Upsample's
// blend of two interpolated rows, each operation rounded to float32 as
// the Go loop rounds it (no fused multiply-add), so the bits are the same.
TEXT ·kernelLerp(SB), NOSPLIT, $0-40
	MOVQ         out+0(FP), DI
	MOVQ         top+8(FP), SI
	MOVQ         bot+16(FP), DX
	VBROADCASTSS a+24(FP), Y15
	MOVQ         n+32(FP), CX
	XORQ         AX, AX

lerpLoop:
	CMPQ    AX, CX
	JGE     lerpDone
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS (DX)(AX*4), Y1
	VSUBPS  Y0, Y1, Y1
	VMULPS  Y15, Y1, Y1
	VADDPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     lerpLoop

lerpDone:
	VZEROUPPER
	RET

// func kernelWiden2(h, sr *float32, n int)
//
// For k < n (a multiple of 8), with a = sr[k] and b = sr[k+1]:
// h[2k] = a + 0.25·(b − a) and h[2k+1] = a + 0.75·(b − a) (h is widen2's
// output from column 1 on), each operation rounded to float32 as in Go.
// The two results of 8 values of k are interleaved by unpacking and a
// swap of 128-bit halves, and stored as 16 consecutive values.
TEXT ·kernelWiden2(SB), NOSPLIT, $0-24
	MOVQ         h+0(FP), DI
	MOVQ         sr+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         $0x3e800000, AX // 0.25
	MOVD         AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x3f400000, AX // 0.75
	MOVD         AX, X15
	VPBROADCASTD X15, Y15
	XORQ         AX, AX

widenLoop:
	CMPQ       AX, CX
	JGE        widenDone
	VMOVUPS    (SI)(AX*4), Y0  // a
	VMOVUPS    4(SI)(AX*4), Y1 // b
	VSUBPS     Y0, Y1, Y1      // b − a
	VMULPS     Y14, Y1, Y2
	VADDPS     Y2, Y0, Y2      // a + 0.25·(b − a)
	VMULPS     Y15, Y1, Y3
	VADDPS     Y3, Y0, Y3      // a + 0.75·(b − a)
	VUNPCKLPS  Y3, Y2, Y4      // pairs of k = 0, 1 | 4, 5
	VUNPCKHPS  Y3, Y2, Y5      // pairs of k = 2, 3 | 6, 7
	VPERM2F128 $0x20, Y5, Y4, Y6
	VPERM2F128 $0x31, Y5, Y4, Y7
	VMOVUPS    Y6, (DI)(AX*8)
	VMOVUPS    Y7, 32(DI)(AX*8)
	ADDQ       $8, AX
	JMP        widenLoop

widenDone:
	VZEROUPPER
	RET

// func kernelDeinterleave2(even, odd, src *float32, n int)
//
// even[k] = src[2k], odd[k] = src[2k+1] for k < n (a multiple of 8): the
// two column phases of a row for a stride-2 convolution. Per 16 values,
// VSHUFPS picks the even (odd) ones of each 128-bit half and VPERMPD puts
// the 64-bit pairs back in order.
TEXT ·kernelDeinterleave2(SB), NOSPLIT, $0-32
	MOVQ even+0(FP), DI
	MOVQ odd+8(FP), DX
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	XORQ AX, AX

deintLoop:
	CMPQ    AX, CX
	JGE     deintDone
	VMOVUPS (SI)(AX*8), Y0
	VMOVUPS 32(SI)(AX*8), Y1
	VSHUFPS $0x88, Y1, Y0, Y2 // 0 2 8 10 | 4 6 12 14
	VSHUFPS $0xdd, Y1, Y0, Y3 // 1 3 9 11 | 5 7 13 15
	VPERMPD $0xd8, Y2, Y2
	VPERMPD $0xd8, Y3, Y3
	VMOVUPS Y2, (DI)(AX*4)
	VMOVUPS Y3, (DX)(AX*4)
	ADDQ    $8, AX
	JMP     deintLoop

deintDone:
	VZEROUPPER
	RET
