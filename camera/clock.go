package camera

import "time"

// unixToNTP is the number of seconds from 1900-01-01 to 1970-01-01.
const unixToNTP = 2208988800

// NTPToTime converts a 64-bit NTP timestamp (RFC 5905: seconds since 1900
// in the upper 32 bits, binary fraction of a second in the lower 32) to
// time.Time.
//
// gortsplib v4.16.2 reads and writes the lower half as nanoseconds, which
// misplaces standard senders (ffmpeg, cameras) by up to 4.3 s; this package
// therefore maps sender reports itself.
func NTPToTime(v uint64) time.Time {
	sec := int64(v>>32) - unixToNTP
	ns := int64((v & 0xffffffff) * uint64(time.Second) >> 32)
	return time.Unix(sec, ns)
}

// rtpClock maps RTP timestamps of one stream to wall-clock capture times:
// through the latest RTCP sender report when one arrived, else relative to
// the arrival time of the first packet.
type rtpClock struct {
	rate int64 // clock rate in Hz

	haveSR bool
	srNTP  time.Time
	srRTP  uint32

	haveBase bool
	baseWall time.Time
	baseRTP  uint32
}

// senderReport records the NTP/RTP pair of an RTCP sender report.
func (c *rtpClock) senderReport(ntp uint64, rtpTS uint32) {
	c.haveSR, c.srNTP, c.srRTP = true, NTPToTime(ntp), rtpTS
}

// capture returns the capture time of a packet with timestamp ts that
// arrived at arrival. Differences are taken modulo 2^32 as signed 32-bit
// values, so wrap-around is handled and reordered packets map backwards.
func (c *rtpClock) capture(ts uint32, arrival time.Time) time.Time {
	if c.haveSR {
		return c.srNTP.Add(c.ticks(int64(int32(ts - c.srRTP))))
	}
	if !c.haveBase {
		c.haveBase, c.baseWall, c.baseRTP = true, arrival, ts
	}
	d := c.ticks(int64(int32(ts - c.baseRTP)))
	// Re-anchor before the signed difference could wrap (about 6.6 h at 90 kHz).
	if d > time.Hour {
		c.baseWall, c.baseRTP = c.baseWall.Add(d), ts
		d = 0
	}
	return c.baseWall.Add(d)
}

func (c *rtpClock) ticks(n int64) time.Duration {
	return time.Duration(n * int64(time.Second) / c.rate)
}
