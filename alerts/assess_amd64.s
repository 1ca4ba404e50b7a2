#include "textflag.h"

// func spanStats(e, d, s, buf *float32, n int, p *spanParams, acc *spanAcc, hist *[histWays][histBins]uint32) int
//
// Per block of 8 pixels (index AX): Y0 = K/S, Y1 = depth, Y2 = b' =
// scale*corr. Valid: e-e, d-d, b'-b' all 0 (finite), d > 0, b' >= 0 (the
// Go loop's test). Y8..Y11 hold corr, tau_e, tau_a, ln(1/(1-coverage));
// Y12, Y13 the counts (int32 lanes: a true compare is -1, subtracted);
// Y14, Y7 the minima; Y15 zero. The histogram bins (histBin) go through
// acc's bins to four histogram copies (R9), lane l into copy l mod 4, so
// that equal bins in a row do not wait on one another's store.
TEXT ·spanStats(SB), NOSPLIT, $0-72
	MOVQ e+0(FP), SI
	MOVQ d+8(FP), DX
	MOVQ s+16(FP), R10
	MOVQ buf+24(FP), DI
	MOVQ n+32(FP), CX
	MOVQ p+40(FP), R11
	MOVQ acc+48(FP), R12
	MOVQ hist+56(FP), R9
	VBROADCASTSS 0(R11), Y8
	VBROADCASTSS 4(R11), Y9
	VBROADCASTSS 8(R11), Y10
	VBROADCASTSS 12(R11), Y11
	VXORPS Y15, Y15, Y15
	VMOVUPS 0(R12), Y12
	VMOVUPS 32(R12), Y13
	VMOVUPS 64(R12), Y14
	VMOVUPS 96(R12), Y7
	XORQ AX, AX

loop:
	LEAQ 8(AX), BX
	CMPQ BX, CX
	JGT  done
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS (DX)(AX*4), Y1
	VMOVUPS (R10)(AX*4), Y2
	VMULPS  Y8, Y2, Y2          // b' = scale * corr
	VSUBPS  Y0, Y0, Y3          // e - e
	VSUBPS  Y1, Y1, Y4          // d - d
	VSUBPS  Y2, Y2, Y5          // b' - b'
	VCMPPS  $0, Y15, Y3, Y3     // == 0 (EQ_OQ): false for NaN and Inf
	VCMPPS  $0, Y15, Y4, Y4
	VCMPPS  $0, Y15, Y5, Y5
	VANDPS  Y4, Y3, Y3
	VANDPS  Y5, Y3, Y3
	VCMPPS  $0x1e, Y15, Y1, Y4  // d > 0 (GT_OQ)
	VCMPPS  $0x1d, Y15, Y2, Y5  // b' >= 0 (GE_OQ)
	VANDPS  Y4, Y3, Y3
	VANDPS  Y5, Y3, Y3
	VMOVMSKPS Y3, R13
	CMPL    R13, $0xff
	JNE     done
	VMOVUPS Y0, (DI)(AX*4)
	VMULPS  16(R11), Y0, Y4     // e * histBins
	VMAXPS  Y15, Y4, Y4         // max(., 0)
	VMINPS  48(R11), Y4, Y4     // min(., histBins-1)
	VCVTTPS2DQ Y4, Y4
	VMOVDQU Y4, 128(R12)
	MOVL    128(R12), R8
	INCL    (R9)(R8*4)
	MOVL    132(R12), R8
	INCL    4096(R9)(R8*4)
	MOVL    136(R12), R8
	INCL    8192(R9)(R8*4)
	MOVL    140(R12), R8
	INCL    12288(R9)(R8*4)
	MOVL    144(R12), R8
	INCL    (R9)(R8*4)
	MOVL    148(R12), R8
	INCL    4096(R9)(R8*4)
	MOVL    152(R12), R8
	INCL    8192(R9)(R8*4)
	MOVL    156(R12), R8
	INCL    12288(R9)(R8*4)
	VCMPPS  $0x1e, Y9, Y0, Y4   // e > tau_e
	VPSUBD  Y4, Y12, Y12
	VMULPS  Y10, Y1, Y5         // tau_a * d
	VCMPPS  $0x1e, Y5, Y2, Y5   // b' > tau_a * d
	VPSUBD  Y5, Y13, Y13
	VMINPS  Y1, Y14, Y14        // nearest depth
	VMULPS  Y11, Y2, Y6         // b' * ln(1/(1-coverage))
	VSUBPS  Y6, Y1, Y6          // d - b' ln(1/(1-coverage))
	VMINPS  Y6, Y7, Y7
	MOVQ    BX, AX
	JMP     loop

done:
	VMOVUPS Y12, 0(R12)
	VMOVUPS Y13, 32(R12)
	VMOVUPS Y14, 64(R12)
	VMOVUPS Y7, 96(R12)
	VZEROUPPER
	MOVQ AX, ret+64(FP)
	RET

// func binKeep(v *float32, n int, from, to float32, lohi *binLoHi) int
//
// Moves the values of v[0:n] (n a multiple of 8) in [from, to) to the
// front of v, in order, returns how many, and lowers lohi's lane minima
// (lo) and raises its lane maxima (hi) over them. Blocks of 8 with no
// value in the range cost one compare; full blocks are stored whole; the
// others value by value.
TEXT ·binKeep(SB), NOSPLIT, $0-40
	MOVQ v+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS from+16(FP), Y8
	VBROADCASTSS to+20(FP), Y9
	MOVQ lohi+24(FP), R12
	VMOVUPS 0(R12), Y10       // lo lanes
	VMOVUPS 32(R12), Y11      // hi lanes
	VMOVUPS 64(R12), Y12      // +MaxFloat32 lanes
	VMOVUPS 96(R12), Y13      // -MaxFloat32 lanes
	XORQ AX, AX               // i
	XORQ DX, DX               // m

kloop:
	CMPQ AX, CX
	JGE  kdone
	VMOVUPS (SI)(AX*4), Y0
	VCMPPS  $0x1d, Y8, Y0, Y1  // e >= from (GE_OQ)
	VCMPPS  $0x11, Y9, Y0, Y2  // e < to (LT_OQ)
	VANDPS  Y2, Y1, Y1
	VMOVMSKPS Y1, R13
	TESTL   R13, R13
	JEQ     knext
	VBLENDVPS Y1, Y0, Y12, Y3  // members, +Max elsewhere
	VMINPS  Y3, Y10, Y10
	VBLENDVPS Y1, Y0, Y13, Y3  // members, -Max elsewhere
	VMAXPS  Y3, Y11, Y11
	CMPL    R13, $0xff
	JNE     kpartial
	VMOVUPS Y0, (SI)(DX*4)
	ADDQ    $8, DX
	JMP     knext

kpartial:
	XORQ R14, R14
klane:
	BTL  R14, R13
	JCC  kskip
	LEAQ (AX)(R14*1), R15
	MOVL (SI)(R15*4), R8
	MOVL R8, (SI)(DX*4)
	INCQ DX
kskip:
	INCQ R14
	CMPQ R14, $8
	JLT  klane

knext:
	ADDQ $8, AX
	JMP  kloop

kdone:
	VMOVUPS Y10, 0(R12)
	VMOVUPS Y11, 32(R12)
	VZEROUPPER
	MOVQ DX, ret+32(FP)
	RET
