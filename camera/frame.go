package camera

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Frame is one decoded picture. RGB is interleaved 8-bit R,G,B, row-major,
// len(RGB) == Width*Height*3.
type Frame struct {
	SourceID string
	// Seq numbers the frames a source produced, from 1, without gaps; a gap
	// seen by the consumer is a dropped frame.
	Seq uint64
	// Capture is the wall-clock capture time: the RTP timestamp mapped through
	// RTCP sender reports when the sender provides them, else through the
	// arrival time of the first packet of the session.
	Capture time.Time
	// Decoded is when the frame became available to consumers.
	Decoded time.Time
	// Codec names the compressed format the frame came from ("H264", "MJPEG", "PNG" ...).
	Codec  string
	Width  int
	Height int
	RGB    []uint8
}

// Source is anything that yields frames.
type Source interface {
	// Next blocks until a frame newer than the previous one is available and
	// moves it into dst. dst.RGB is taken over by the source for reuse, and
	// dst.RGB afterwards holds the new frame: callers keep handing the same
	// Frame back and no frame memory is allocated in the steady state.
	Next(ctx context.Context, dst *Frame) error
}

// ConsumerPaced is implemented by sources whose frames come as fast as
// they are taken (a replay at "max" speed, an image sequence without fps):
// a consumer that reads ahead must then wait until it used a frame before
// it reads the next, or frames would be lost. A live camera is not
// consumer-paced: its newest frame replaces the older ones.
type ConsumerPaced interface {
	ConsumerPaced() bool
}

// ErrClosed is returned by Next after the mailbox was closed.
var ErrClosed = errors.New("camera: source closed")

// Mailbox is a single-slot, latest-frame-wins hand-over from one producer.
// Several consumers may call Next; each frame goes to exactly one of them.
// With one consumer, three buffers circulate: the producer's work
// buffer, the slot, and the consumer's frame; every hand-over is a swap of
// slices, never a copy or an allocation.
type Mailbox struct {
	mu        sync.Mutex
	slot      Frame
	full      bool
	closed    bool
	err       error
	notify    chan struct{}
	published uint64
	dropped   uint64
}

// NewMailbox returns an empty mailbox.
func NewMailbox() *Mailbox {
	return &Mailbox{notify: make(chan struct{}, 1)}
}

// Publish moves f into the slot. If the previous frame was never taken it is
// dropped and counted. On return f.RGB is a spare buffer (the previous slot
// buffer) that the producer decodes its next frame into.
func (m *Mailbox) Publish(f *Frame) {
	m.mu.Lock()
	if m.full {
		m.dropped++
	}
	m.published++
	spare := m.slot.RGB
	m.slot = *f
	m.full = true
	f.RGB = spare[:0]
	if !m.closed {
		select {
		case m.notify <- struct{}{}:
		default:
		}
	}
	m.mu.Unlock()
}

// Close wakes all waiting consumers; Next then returns err (ErrClosed if nil)
// once the last published frame has been taken.
func (m *Mailbox) Close(err error) {
	if err == nil {
		err = ErrClosed
	}
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		m.err = err
		close(m.notify)
	}
	m.mu.Unlock()
}

// Next implements Source.
func (m *Mailbox) Next(ctx context.Context, dst *Frame) error {
	for {
		m.mu.Lock()
		if m.full {
			old := dst.RGB
			*dst = m.slot
			m.slot.RGB = old
			m.full = false
			m.mu.Unlock()
			return nil
		}
		if m.closed {
			err := m.err
			m.mu.Unlock()
			return err
		}
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.notify:
		}
	}
}

// Counts reports how many frames were published and how many were dropped
// because no consumer took them before the next one arrived.
func (m *Mailbox) Counts() (published, dropped uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.published, m.dropped
}

// growRGB returns b resized to n bytes, reusing its backing array when it is
// large enough.
func growRGB(b []uint8, n int) []uint8 {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]uint8, n)
}
