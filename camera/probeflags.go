package camera

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// ProbeFlags are the flags of `didoedge camera probe`.
type ProbeFlags struct {
	Frames         int
	UDP            bool
	Timeout, Stall time.Duration
}

// AddFlags declares the flags on fs.
func (f *ProbeFlags) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&f.Frames, "frames", 30, "number of frames to decode")
	fs.BoolVar(&f.UDP, "udp", false, "receive RTP over UDP instead of TCP")
	fs.DurationVar(&f.Timeout, "timeout", 20*time.Second, "give up after this long")
	fs.DurationVar(&f.Stall, "stall", 2*time.Second, "no-frame watchdog")
}

// Probe probes the camera at url (Probe) within --timeout, printing a line
// per frame and the report to w.
func (f *ProbeFlags) Probe(ctx context.Context, url string, w io.Writer, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	cfg := RTSPConfig{URL: url, UDP: f.UDP, StallTimeout: f.Stall, Logger: log}
	rep, err := Probe(ctx, cfg, f.Frames, func(fr *Frame) {
		fmt.Fprintf(w, "frame %4d  %dx%d  capture %s  latency %7.2f ms\n",
			fr.Seq, fr.Width, fr.Height, fr.Capture.Format("15:04:05.000"), float64(fr.Decoded.Sub(fr.Capture).Microseconds())/1000)
	})
	if err != nil {
		return err
	}
	rep.Write(w, url)
	return nil
}
