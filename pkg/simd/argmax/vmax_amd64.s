#include "textflag.h"

// func updateArgmaxBlocks(top *float32, cls *int32, z *float32, n int, c int32)
//
// Per 8 lanes: mask = z > top (ordered, non-signalling: false when
// either is NaN, as Go's >), then top = mask ? z : top and
// cls = mask ? c : cls, each a blend on the mask's sign bits.
TEXT ·updateArgmaxBlocks(SB), NOSPLIT, $0-36
	MOVQ         top+0(FP), SI
	MOVQ         cls+8(FP), DX
	MOVQ         z+16(FP), DI
	MOVQ         n+24(FP), CX
	MOVL         c+32(FP), AX
	MOVD         AX, X15
	VPBROADCASTD X15, Y15
	XORQ         AX, AX

loop:
	VMOVUPS   (DI)(AX*4), Y0
	VMOVUPS   (SI)(AX*4), Y1
	VCMPPS    $0x1e, Y1, Y0, Y2       // z > top (GT_OQ)
	VBLENDVPS Y2, Y0, Y1, Y1          // top = mask ? z : top
	VMOVUPS   (DX)(AX*4), Y3
	VBLENDVPS Y2, Y15, Y3, Y3         // cls = mask ? c : cls
	VMOVUPS   Y1, (SI)(AX*4)
	VMOVUPS   Y3, (DX)(AX*4)
	ADDQ      $8, AX
	CMPQ      AX, CX
	JLT       loop

	VZEROUPPER
	RET
