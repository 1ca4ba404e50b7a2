package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// On disk a record is: magic u32, body length u32, CRC-32C(body) u32, body.
// Body: kind u8, seq u64, then for data records flags u8, qos u8,
// topic length u16, topic, payload; for drop-range records the last seq
// of the range u64. All integers little-endian.
const (
	recordMagic  = 0x4f42444f // "ODBO"
	headerSize   = 12
	maxBodySize  = 16 << 20
	dataBodyHead = 1 + 8 + 1 + 1 + 2
)

// Kind is the type of a log record.
type Kind uint8

// Record kinds.
const (
	// KindData carries a message.
	KindData Kind = 1
	// KindDrop marks the data record with the same seq as dropped.
	KindDrop Kind = 2
	// KindBase starts every segment and carries the last seq assigned so
	// far, so that sequence numbers survive deleting every older segment.
	KindBase Kind = 3
	// KindDropRange marks every seq from Seq to its last seq as dropped or
	// lost: a rewrite of the log writes it for the seqs between the
	// pending records it copies, whose data and drop records it deletes.
	KindDropRange Kind = 4
)

const flagRetain, flagDroppable = 1, 2

// Errors of DecodeRecord.
var (
	// ErrTorn means the buffer ends inside a record (a write cut short).
	ErrTorn = errors.New("torn record")
	// ErrCorrupt means the record's framing or checksum is wrong.
	ErrCorrupt = errors.New("corrupt record")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one message in the outbox.
type Record struct {
	Seq       uint64
	Topic     string
	QoS       byte
	Retain    bool
	Droppable bool
	Payload   []byte
	// last is the last seq of a drop-range record.
	last uint64
}

func (r *Record) size() int64 {
	return int64(headerSize + dataBodyHead + len(r.Topic) + len(r.Payload))
}

// appendRecord encodes a record of the given kind onto dst.
func appendRecord(dst []byte, kind Kind, r *Record) []byte {
	body := 1 + 8
	switch kind {
	case KindData:
		body = dataBodyHead + len(r.Topic) + len(r.Payload)
	case KindDropRange:
		body = 1 + 8 + 8
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, recordMagic)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(body))
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	b0 := len(dst)
	dst = append(dst, byte(kind))
	dst = binary.LittleEndian.AppendUint64(dst, r.Seq)
	if kind == KindDropRange {
		dst = binary.LittleEndian.AppendUint64(dst, r.last)
	}
	if kind == KindData {
		var flags byte
		if r.Retain {
			flags |= flagRetain
		}
		if r.Droppable {
			flags |= flagDroppable
		}
		dst = append(dst, flags, r.QoS)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.Topic)))
		dst = append(dst, r.Topic...)
		dst = append(dst, r.Payload...)
	}
	binary.LittleEndian.PutUint32(dst[start+8:], crc32.Checksum(dst[b0:], castagnoli))
	return dst
}

// DecodeRecord decodes the record at the start of b and returns it, its
// kind and its encoded length. The payload aliases b.
func DecodeRecord(b []byte) (Record, Kind, int, error) {
	if len(b) < headerSize {
		return Record{}, 0, 0, ErrTorn
	}
	if binary.LittleEndian.Uint32(b) != recordMagic {
		return Record{}, 0, 0, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if n < 9 || n > maxBodySize {
		return Record{}, 0, 0, fmt.Errorf("%w: body length %d", ErrCorrupt, n)
	}
	if uint64(len(b)-headerSize) < uint64(n) {
		return Record{}, 0, 0, ErrTorn
	}
	body := b[headerSize : headerSize+int(n)]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		return Record{}, 0, 0, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	kind := Kind(body[0])
	r := Record{Seq: binary.LittleEndian.Uint64(body[1:])}
	switch kind {
	case KindDrop, KindBase:
		if n != 9 {
			return Record{}, 0, 0, fmt.Errorf("%w: kind %d with body length %d", ErrCorrupt, kind, n)
		}
	case KindDropRange:
		if n != 17 {
			return Record{}, 0, 0, fmt.Errorf("%w: kind %d with body length %d", ErrCorrupt, kind, n)
		}
		r.last = binary.LittleEndian.Uint64(body[9:])
		if r.last < r.Seq {
			return Record{}, 0, 0, fmt.Errorf("%w: drop range %d..%d", ErrCorrupt, r.Seq, r.last)
		}
	case KindData:
		if n < dataBodyHead {
			return Record{}, 0, 0, fmt.Errorf("%w: data body length %d", ErrCorrupt, n)
		}
		flags, qos := body[9], body[10]
		if flags&^(flagRetain|flagDroppable) != 0 || qos > 2 {
			return Record{}, 0, 0, fmt.Errorf("%w: flags %#x qos %d", ErrCorrupt, flags, qos)
		}
		tl := int(binary.LittleEndian.Uint16(body[11:]))
		if dataBodyHead+tl > int(n) {
			return Record{}, 0, 0, fmt.Errorf("%w: topic length %d", ErrCorrupt, tl)
		}
		r.Retain, r.Droppable, r.QoS = flags&flagRetain != 0, flags&flagDroppable != 0, qos
		r.Topic = string(body[dataBodyHead : dataBodyHead+tl])
		r.Payload = body[dataBodyHead+tl:]
	default:
		return Record{}, 0, 0, fmt.Errorf("%w: kind %d", ErrCorrupt, kind)
	}
	return r, kind, headerSize + int(n), nil
}
