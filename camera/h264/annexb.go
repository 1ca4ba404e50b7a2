package h264

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var startCode = [4]byte{0, 0, 0, 1}

// AnnexBSize is the length of au written with four-byte start codes.
func AnnexBSize(au [][]byte) int {
	n := 0
	for _, nalu := range au {
		if len(nalu) > 0 {
			n += 4 + len(nalu)
		}
	}
	return n
}

// AppendAnnexB appends au to dst, each non-empty NAL unit preceded by a
// four-byte start code (ITU-T H.264 Annex B).
func AppendAnnexB(dst []byte, au [][]byte) []byte {
	for _, nalu := range au {
		if len(nalu) == 0 {
			continue
		}
		dst = append(dst, startCode[:]...)
		dst = append(dst, nalu...)
	}
	return dst
}

// SplitAnnexB appends to dst the NAL units of an Annex-B byte stream (start
// codes of three or four bytes). The returned slices alias b. Zero bytes
// after a NAL unit (trailing_zero_8bits) are not part of it, so no NAL unit
// returned ends in 0x00.
func SplitAnnexB(dst [][]byte, b []byte) ([][]byte, error) {
	start := -1 // first byte of the current NAL unit
	i := 0
	for i+2 < len(b) {
		if b[i] == 0 && b[i+1] == 0 && b[i+2] == 1 {
			if start >= 0 {
				end := i
				for end > start && b[end-1] == 0 {
					end--
				}
				if end > start {
					dst = append(dst, b[start:end])
				}
			} else if !allZero(b[:i]) {
				return dst, fmt.Errorf("annex-b stream starts with %d bytes before the first start code", i)
			}
			i += 3
			start = i
			continue
		}
		i++
	}
	if start < 0 {
		if len(b) == 0 {
			return dst, nil
		}
		return dst, errors.New("annex-b stream has no start code")
	}
	end := len(b)
	for end > start && b[end-1] == 0 { // trailing_zero_8bits
		end--
	}
	if end > start {
		dst = append(dst, b[start:end])
	}
	return dst, nil
}

func allZero(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}

// SplitAVCC appends to dst the NAL units of an AVCC (length-prefixed) buffer
// with big-endian lengths of lengthSize bytes (1, 2 or 4, from the
// avcC record). The returned slices alias b.
func SplitAVCC(dst [][]byte, b []byte, lengthSize int) ([][]byte, error) {
	if lengthSize != 1 && lengthSize != 2 && lengthSize != 4 {
		return dst, fmt.Errorf("avcc length size %d (want 1, 2 or 4)", lengthSize)
	}
	for off := 0; off < len(b); {
		if len(b)-off < lengthSize {
			return dst, fmt.Errorf("avcc: %d trailing bytes at offset %d, shorter than a length field", len(b)-off, off)
		}
		var n int
		switch lengthSize {
		case 1:
			n = int(b[off])
		case 2:
			n = int(binary.BigEndian.Uint16(b[off:]))
		case 4:
			n = int(binary.BigEndian.Uint32(b[off:]))
		}
		off += lengthSize
		if n > len(b)-off {
			return dst, fmt.Errorf("avcc: NAL unit of %d bytes at offset %d overruns the %d-byte buffer", n, off, len(b))
		}
		if n > 0 {
			dst = append(dst, b[off:off+n])
		}
		off += n
	}
	return dst, nil
}

// AppendAVCC appends au to dst with four-byte big-endian length prefixes.
func AppendAVCC(dst []byte, au [][]byte) []byte {
	for _, nalu := range au {
		if len(nalu) == 0 {
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(nalu)))
		dst = append(dst, nalu...)
	}
	return dst
}
