#include "textflag.h"

// func spanStats(e, d, s, buf *float32, n int, p *spanParams, acc *spanAcc) int
//
// Per block of 8 pixels (index AX): Y0 = K/S, Y1 = depth, Y2 = b' =
// scale*corr. Valid: e-e, d-d, b'-b' all 0 (finite), d > 0, b' >= 0 (the
// Go loop's test). Y8..Y11 hold corr, tau_e, tau_a, ln(1/(1-coverage));
// Y12, Y13 the counts (int32 lanes: a true compare is -1, subtracted);
// Y14, Y7 the minima; Y15 zero.
TEXT ·spanStats(SB), NOSPLIT, $0-64
	MOVQ e+0(FP), SI
	MOVQ d+8(FP), DX
	MOVQ s+16(FP), R10
	MOVQ buf+24(FP), DI
	MOVQ n+32(FP), CX
	MOVQ p+40(FP), R11
	MOVQ acc+48(FP), R12
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
	MOVQ AX, ret+56(FP)
	RET
