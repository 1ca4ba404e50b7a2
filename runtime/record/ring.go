package record

import "slices"

// ringEntry is one encoded message held for the pre-roll.
type ringEntry struct {
	logTime uint64
	seq     uint32
	order   uint64 // arrival order, to keep file order among equal times
	data    []byte
}

// maxSpare is how many freed buffers a channel keeps for reuse: with
// messages evicted one for one, a warm ring allocates nothing.
const maxSpare = 2

// channelRing is a circular queue of one channel's messages.
type channelRing struct {
	entries []ringEntry
	head, n int
	bytes   int64 // capacity of the live buffers
	spare   [][]byte
}

func (c *channelRing) oldest() *ringEntry { return &c.entries[c.head] }

func (c *channelRing) push(logTime uint64, seq uint32, order uint64, data []byte) {
	if c.n == len(c.entries) {
		grown := make([]ringEntry, max(8, 2*len(c.entries)))
		for i := range c.n {
			grown[i] = c.entries[(c.head+i)%len(c.entries)]
		}
		c.entries, c.head = grown, 0
	}
	var buf []byte
	if k := len(c.spare); k > 0 {
		buf, c.spare = c.spare[k-1], c.spare[:k-1]
	}
	e := &c.entries[(c.head+c.n)%len(c.entries)]
	*e = ringEntry{logTime: logTime, seq: seq, order: order, data: append(buf[:0], data...)}
	c.n++
	c.bytes += int64(cap(e.data))
}

func (c *channelRing) pop() {
	e := &c.entries[c.head]
	c.bytes -= int64(cap(e.data))
	if len(c.spare) < maxSpare {
		c.spare = append(c.spare, e.data)
	}
	e.data = nil
	c.head = (c.head + 1) % len(c.entries)
	c.n--
}

// ring is the event mode's pre-roll: every channel's messages of the last
// preRoll nanoseconds, their buffers bounded by limit bytes (the oldest
// message goes first). Its memory is at most limit plus maxSpare buffers
// per channel.
type ring struct {
	preRoll uint64
	limit   int64
	chans   []channelRing // by channel spec index
	order   uint64
	newest  uint64
	live    int64
}

func (r *ring) push(spec int, logTime uint64, seq uint32, data []byte) {
	for len(r.chans) <= spec {
		r.chans = append(r.chans, channelRing{})
	}
	r.newest = max(r.newest, logTime)
	r.evict(int64(len(data)))
	if int64(len(data)) > r.limit {
		return // larger than the whole ring
	}
	c := &r.chans[spec]
	before := c.bytes
	r.order++
	c.push(logTime, seq, r.order, data)
	r.live += c.bytes - before
}

// evict drops messages older than the pre-roll, then the oldest messages
// until incoming more bytes fit under the limit.
func (r *ring) evict(incoming int64) {
	cut := uint64(0)
	if r.newest > r.preRoll {
		cut = r.newest - r.preRoll
	}
	for i := range r.chans {
		c := &r.chans[i]
		for c.n > 0 && c.oldest().logTime < cut {
			r.live -= int64(cap(c.oldest().data))
			c.pop()
		}
	}
	for r.live+incoming > r.limit {
		best := -1
		for i := range r.chans {
			c := &r.chans[i]
			if c.n > 0 && (best < 0 || c.oldest().order < r.chans[best].oldest().order) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		c := &r.chans[best]
		r.live -= int64(cap(c.oldest().data))
		c.pop()
	}
}

type ringRef struct {
	spec int
	e    *ringEntry
}

// since appends the held messages with logTime >= from to dst, in log
// time order (arrival order among equal times).
func (r *ring) since(from uint64, dst []ringRef) []ringRef {
	for i := range r.chans {
		c := &r.chans[i]
		for k := range c.n {
			e := &c.entries[(c.head+k)%len(c.entries)]
			if e.logTime >= from {
				dst = append(dst, ringRef{spec: i, e: e})
			}
		}
	}
	slices.SortFunc(dst, func(a, b ringRef) int {
		switch {
		case a.e.logTime < b.e.logTime:
			return -1
		case a.e.logTime > b.e.logTime:
			return 1
		case a.e.order < b.e.order:
			return -1
		case a.e.order > b.e.order:
			return 1
		}
		return 0
	})
	return dst
}
