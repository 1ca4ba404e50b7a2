package camera

import (
	"testing"
	"time"
)

func TestNTPToTime(t *testing.T) {
	cases := []struct {
		ntp  uint64
		want time.Time
	}{
		{unixToNTP << 32, time.Unix(0, 0)},
		{(unixToNTP+1)<<32 | 1<<31, time.Unix(1, 500_000_000)},
		{(unixToNTP+1_700_000_000)<<32 | 1<<30, time.Unix(1_700_000_000, 250_000_000)},
	}
	for _, tc := range cases {
		if got := NTPToTime(tc.ntp); !got.Equal(tc.want) {
			t.Errorf("NTPToTime(%#x) = %v, want %v", tc.ntp, got, tc.want)
		}
	}
}

func TestRTPClock(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := rtpClock{rate: 90000}
	// Without a sender report: relative to the first arrival.
	if got := c.capture(1000, t0); !got.Equal(t0) {
		t.Fatalf("first packet %v, want %v", got, t0)
	}
	if got := c.capture(1000+9000, t0.Add(time.Second)); !got.Equal(t0.Add(100 * time.Millisecond)) {
		t.Fatalf("+9000 ticks = %v, want +100ms", got.Sub(t0))
	}
	// Wrap-around of the 32-bit timestamp.
	w := rtpClock{rate: 90000}
	w.capture(0xffffff00, t0)
	if got := w.capture(0x100, t0); got.Sub(t0) != time.Duration(0x200)*time.Second/90000 {
		t.Fatalf("across the wrap: %v", got.Sub(t0))
	}
	// A sender report takes over: NTP 10.5 s after t0 at RTP 50000.
	c.senderReport((unixToNTP+1_700_000_010)<<32|1<<31, 50000)
	if got := c.capture(50000+45000, time.Time{}); !got.Equal(t0.Add(11 * time.Second)) {
		t.Fatalf("after SR: %v, want t0+11s", got.Sub(t0))
	}
	if got := c.capture(50000-9000*5, time.Time{}); !got.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("before the SR timestamp: %v, want t0+10s", got.Sub(t0))
	}
}
