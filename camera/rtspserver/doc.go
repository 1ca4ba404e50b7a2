// Package rtspserver is an RTSP server (gortsplib) with two kinds of paths:
//
//   - generated paths, whose frames come from a FrameSource (the simulated
//     world, or synthetic frames in tests), JPEG-encoded in pure Go and sent
//     as RTP/M-JPEG (RFC 2435) at a fixed rate;
//   - published paths: any other path accepts one publisher (RTSP ANNOUNCE +
//     RECORD, e.g. ffmpeg -f rtsp) and relays its packets to every reader of
//     that path.
//
// A Server can be closed and started again on the same address, which the
// reconnect tests of package camera rely on.
package rtspserver
