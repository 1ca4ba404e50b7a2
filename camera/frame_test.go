package camera

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestMailboxLatestWins(t *testing.T) {
	m := NewMailbox()
	work := Frame{RGB: make([]uint8, 3)}
	for seq := uint64(1); seq <= 3; seq++ {
		work.Seq = seq
		work.RGB = growRGB(work.RGB, 3)
		work.RGB[0] = uint8(seq)
		m.Publish(&work)
	}
	var got Frame
	if err := m.Next(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Seq != 3 || got.RGB[0] != 3 {
		t.Fatalf("got seq %d pixel %d, want the latest (3)", got.Seq, got.RGB[0])
	}
	if pub, drop := m.Counts(); pub != 3 || drop != 2 {
		t.Fatalf("published %d dropped %d, want 3 and 2", pub, drop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.Next(ctx, &got); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an empty mailbox: %v, want deadline exceeded", err)
	}
	m.Close(nil)
	if err := m.Next(context.Background(), &got); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	m.Publish(&work) // publishing after Close must not panic
}

// TestMailboxNoAllocation: in the steady state the three buffers circulate
// and nothing is allocated.
func TestMailboxNoAllocation(t *testing.T) {
	const n = 640 * 192 * 3
	m := NewMailbox()
	work := Frame{}
	var got Frame
	ctx := context.Background()
	step := func() {
		work.RGB = growRGB(work.RGB, n)
		work.RGB[0]++
		m.Publish(&work)
		if err := m.Next(ctx, &got); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		step()
	}
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Fatalf("%v allocations per frame, want 0", a)
	}
}

func TestMailboxWakesWaiter(t *testing.T) {
	m := NewMailbox()
	done := make(chan uint64)
	go func() {
		var f Frame
		if err := m.Next(context.Background(), &f); err != nil {
			done <- 0
			return
		}
		done <- f.Seq
	}()
	time.Sleep(10 * time.Millisecond)
	m.Publish(&Frame{Seq: 7, RGB: []uint8{1, 2, 3}})
	select {
	case s := <-done:
		if s != 7 {
			t.Fatalf("waiter got seq %d, want 7", s)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("waiter not woken")
	}
}
