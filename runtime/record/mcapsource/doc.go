// Package mcapsource replays recorded drives: a camera.Source that reads
// the frames of one camera from an MCAP recording (runtime/record writes
// them, runtime/record/mcaprec is the layout) in log-time order, at the recorded
// pace or as fast as consumed, with their original capture times and
// sequence numbers. Reader walks every message of a recording (events and
// zone states for comparisons, maps for exports).
//
// Files are read as a stream (the summary is not needed), from a local
// file or any Opener (an object in S3, one GET per pass), so a recording
// whose writer was killed replays up to its last complete chunk; the
// source then reports Truncated. Damaged files give errors that name the
// file, the byte offset and, where known, the channel.
package mcapsource
