// Package camera delivers decoded RGB frames from cameras to the runtime.
//
// A Source hands out the newest frame with latest-frame-wins semantics: a slow
// consumer never builds a queue, older unread frames are dropped and counted.
// Frames carry a source id, a per-source sequence number and a capture time.
//
// Sources:
//   - RTSPSource: an RTSP client (gortsplib) for H.264 / H.265 (decoded by
//     libavcodec through camera/h264) and M-JPEG (decoded in pure Go), run by a
//     supervisor that reconnects with capped exponential backoff and jitter and
//     restarts a session that stops delivering frames (the stall watchdog). Its
//     lifecycle is reported as typed Events (connected, fault, recovered).
//   - ImageSequence: a sorted directory of PNG/JPEG files (for example KITTI's
//     image_02/data) played at a fixed rate or as fast as consumed.
//
// Buffers circulate between producer and consumer (see Mailbox), so that the
// steady state allocates no frame memory.
package camera
