#include "textflag.h"

// func nonFiniteBlocks(p *float32, n int) int
//
// Counts NaN and ±Inf among n float32 at p (n a multiple of 32): a value
// is non-finite when its exponent bits (mask 0x7f800000, Y15) are all
// ones. Per 8 values: AND with the mask, compare equal to the mask (-1 in
// a lane that is non-finite), add to one of four int32 accumulators
// (Y0..Y3, so that the adds of a 32-value step do not wait on each
// other); the lanes are negated counts, summed at the end.
TEXT ·nonFiniteBlocks(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0x7f800000, AX
	MOVD AX, X15
	VPBROADCASTD X15, Y15
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	XORQ AX, AX

loop:
	CMPQ AX, CX
	JGE  sum
	VPAND    (SI)(AX*4), Y15, Y4
	VPAND    32(SI)(AX*4), Y15, Y5
	VPAND    64(SI)(AX*4), Y15, Y6
	VPAND    96(SI)(AX*4), Y15, Y7
	VPCMPEQD Y15, Y4, Y4
	VPCMPEQD Y15, Y5, Y5
	VPCMPEQD Y15, Y6, Y6
	VPCMPEQD Y15, Y7, Y7
	VPADDD   Y4, Y0, Y0
	VPADDD   Y5, Y1, Y1
	VPADDD   Y6, Y2, Y2
	VPADDD   Y7, Y3, Y3
	ADDQ     $32, AX
	JMP      loop

sum:
	VPADDD       Y1, Y0, Y0
	VPADDD       Y3, Y2, Y2
	VPADDD       Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	MOVL         X0, AX
	NEGL         AX
	VZEROUPPER
	MOVQ         AX, ret+16(FP)
	RET
