#include "textflag.h"

// exp as math.Exp computes it on amd64 with FMA, four float64 lanes at
// a time. The method is Naoki Shibata's ("Efficient evaluation methods
// of elementary functions suitable for SIMD computation", ISC 2010; the
// reduction constants and the 1/n! coefficients come from his SLEEF
// library, as in Go's math package): with k = round(x·log2 e),
//
//	r = (x - k·ln2_hi - k·ln2_lo) / 16           (two fused multiply-adds)
//	p = 1 + r/2! + r²/3! + ... + r^7/8!           (Horner, fused)
//	y = r·p                                       (= e^r - 1)
//	y ← y·(y+2) three times, then y·(y+2) + 1     (squares e^r up to e^16r)
//	exp(x) = y · 2^k                              (2^k built from its bits)
//
// Each step below is the packed twin of one scalar instruction of
// math.Exp's FMA path, with the same operands in the same order and
// round-to-nearest (Go never changes MXCSR), so every lane is rounded as
// math.Exp rounds it: the results are the same float64 bits. Lanes
// whose 2^k is not a normal number (k+1023 outside 1..2046), or whose
// argument is above exp's overflow bound, +Inf or NaN, take other
// branches in math.Exp; a block holding one is left to the caller.

// Each constant four times (one ymm operand).
#define CONST4(name, bits) \
	DATA name<>+0(SB)/8, $bits; \
	DATA name<>+8(SB)/8, $bits; \
	DATA name<>+16(SB)/8, $bits; \
	DATA name<>+24(SB)/8, $bits; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

CONST4(sixteenth, 0x3fb0000000000000) // 1/16
CONST4(one, 0x3ff0000000000000)       // 1
CONST4(two, 0x4000000000000000)       // 2
CONST4(inv2f, 0x3fe0000000000000)     // 1/2!
CONST4(inv3f, 0x3fc5555555555555)     // 1/3!
CONST4(inv4f, 0x3fa5555555555555)     // 1/4!
CONST4(inv5f, 0x3f81111111111111)     // 1/5!
CONST4(inv6f, 0x3f56c16c16c16c17)     // 1/6!
CONST4(inv7f, 0x3f2a01a01a01a01a)     // 1/7!
CONST4(inv8f, 0x3efa01a01a01a01a)     // 1/8!

// int32 lanes: 1023 (exponent bias), 0 and 2046 (bounds of k+1023).
DATA bias<>+0(SB)/8, $0x000003ff000003ff
DATA bias<>+8(SB)/8, $0x000003ff000003ff
GLOBL bias<>(SB), RODATA|NOPTR, $16
DATA zero32<>+0(SB)/8, $0
DATA zero32<>+8(SB)/8, $0
GLOBL zero32<>(SB), RODATA|NOPTR, $16
DATA top32<>+0(SB)/8, $0x000007fe000007fe
DATA top32<>+8(SB)/8, $0x000007fe000007fe
GLOBL top32<>(SB), RODATA|NOPTR, $16

#define LOG2E 0x3ff71547652b82fe    // log2(e)
#define LN2HI 0x3fe62e42fefa3000    // ln 2, upper bits (k·LN2HI is exact)
#define LN2LO 0x3d53de6af278ece6    // ln 2 - LN2HI
#define OVERFLOW 0x40862e42fefa39ef // 709.782712893384: above it exp is +Inf

// EXP4 evaluates the four lanes from float32 at zoff(DI)(AX*4) into X
// (the sum s+e+1 with the float64 at soff(SI)(AX*8)) and ANDs their
// 4-bit "all steps as math.Exp's main path" mask into R8. T, P, Q are
// scratch; KX and PX, QX are the xmm halves of K, P and Q.
// Constants: Y15 maxz, Y14 log2 e, Y13 LN2HI, Y12 LN2LO, Y11 OVERFLOW.
#define EXP4(zoff, soff, X, T, P, PX, Q, QX, K, KX) \
	VCVTPS2PD    zoff(DI)(AX*4), X;  \ // x = float64(z)
	VMINPD       X, Y15, X;          \ // x = maxz < x ? maxz : x (NaN stays)
	VCMPPD       $0x12, Y11, X, T;   \ // x <= OVERFLOW (false for NaN, +Inf)
	VMOVMSKPD    T, R9;              \
	ANDL         R9, R8;             \
	VMULPD       Y14, X, T;          \ // x·log2 e
	VCVTPD2DQY   T, KX;              \ // k, rounded to nearest
	VCVTDQ2PD    KX, T;              \ // float64(k)
	VPADDD       bias<>(SB), KX, KX; \ // k + 1023
	VPCMPGTD     zero32<>(SB), KX, PX; \
	VPCMPGTD     top32<>(SB), KX, QX;  \
	VPANDN       PX, QX, PX;         \ // 0 < k+1023 <= 2046
	VMOVMSKPS    PX, R9;             \
	ANDL         R9, R8;             \
	VFNMADD231PD Y13, T, X;          \ // r = x - k·LN2HI
	VFNMADD231PD Y12, T, X;          \ // r -= k·LN2LO
	VMULPD       sixteenth<>(SB), X, X; \
	VMOVUPD      inv8f<>(SB), P;     \
	VFMADD213PD  inv7f<>(SB), X, P;  \
	VFMADD213PD  inv6f<>(SB), X, P;  \
	VFMADD213PD  inv5f<>(SB), X, P;  \
	VFMADD213PD  inv4f<>(SB), X, P;  \
	VFMADD213PD  inv3f<>(SB), X, P;  \
	VFMADD213PD  inv2f<>(SB), X, P;  \
	VFMADD213PD  one<>(SB), X, P;    \
	VMULPD       P, X, X;            \ // y = r·p
	VADDPD       two<>(SB), X, P;    \
	VMULPD       P, X, X;            \ // y·(y+2), three times
	VADDPD       two<>(SB), X, P;    \
	VMULPD       P, X, X;            \
	VADDPD       two<>(SB), X, P;    \
	VMULPD       P, X, X;            \
	VADDPD       two<>(SB), X, P;    \
	VFMADD213PD  one<>(SB), P, X;    \ // y·(y+2) + 1 = e^(16r)
	VPMOVZXDQ    KX, Q;              \
	VPSLLQ       $52, Q, Q;          \ // 2^k
	VMULPD       Q, X, X;            \ // exp(x)
	VADDPD       one<>(SB), X, X;    \ // e + 1
	VADDPD       soff(SI)(AX*8), X, X  // s + (e+1)

// func addExpPlusOneBlocks(s *float64, z *float32, n int, maxz float64) int
//
// Eight lanes per step while no lane needs math.Exp's other branches;
// after a step that found one, four lanes, stopping at the first block
// of four that holds one (nothing of it is stored).
TEXT ·addExpPlusOneBlocks(SB), NOSPLIT, $0-40
	MOVQ         s+0(FP), SI
	MOVQ         z+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSD maxz+24(FP), Y15
	MOVQ         $LOG2E, AX
	MOVQ         AX, X14
	VBROADCASTSD X14, Y14
	MOVQ         $LN2HI, AX
	MOVQ         AX, X13
	VBROADCASTSD X13, Y13
	MOVQ         $LN2LO, AX
	MOVQ         AX, X12
	VBROADCASTSD X12, Y12
	MOVQ         $OVERFLOW, AX
	MOVQ         AX, X11
	VBROADCASTSD X11, Y11
	XORQ         AX, AX

loop8:
	MOVQ CX, DX
	SUBQ AX, DX
	CMPQ DX, $8
	JLT  loop4
	MOVL $15, R8
	EXP4(0, 0, Y0, Y1, Y2, X2, Y3, X3, Y4, X4)
	EXP4(16, 32, Y5, Y6, Y7, X7, Y8, X8, Y9, X9)
	CMPL R8, $15
	JNE  loop4
	VMOVUPD Y0, (SI)(AX*8)
	VMOVUPD Y5, 32(SI)(AX*8)
	ADDQ $8, AX
	JMP  loop8

loop4:
	MOVQ CX, DX
	SUBQ AX, DX
	CMPQ DX, $4
	JLT  done
	MOVL $15, R8
	EXP4(0, 0, Y0, Y1, Y2, X2, Y3, X3, Y4, X4)
	CMPL R8, $15
	JNE  done
	VMOVUPD Y0, (SI)(AX*8)
	ADDQ $4, AX
	JMP  loop8

done:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET
