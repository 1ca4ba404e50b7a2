// Package record writes what a vehicle saw to MCAP files that Foxglove
// opens: per camera the frame (foxglove.CompressedImage, JPEG or PNG), the
// depth, Laplace scale and epistemic maps (foxglove.RawImage; by default
// on the grids the models computed them on, in float16, the resize rule to
// the frame in the channel's metadata: runtime/record/mcaprec), the
// camera intrinsics (foxglove.CameraCalibration), zone states and alert
// events (JSON with their JSON Schemas), and the identity of the models as
// metadata. The layout is runtime/record/mcaprec's; runtime/record/mcapsource reads it
// back, and ReadRecording summarizes a file (frames, events, models).
//
// Two modes: continuous (files rotated by size or recorded time, the
// directory kept within a byte budget by deleting the oldest files first)
// and event (one clip per episode, with a pre-roll taken from a bounded
// in-memory ring and a post-roll after the last episode ended).
//
// The recorder never slows its caller: Frame copies the frame into one of
// a fixed number of slots and returns; JPEG encoding, compression and disk
// writes run on the recorder's goroutine. When every slot is taken the
// frame is dropped and counted (Stats). Files are chunked and written
// straight through, so a killed process leaves every complete chunk
// readable; only the chunk being filled (chunk_bytes before compression)
// and the summary are lost.
//
// With an upload section (Config.Upload) every finished file, and any a
// previous process left in the directory, is moved into the durable
// upload queue of runtime/record/upload by a goroutine of its own (the
// queue hashes the file); the owner runs the queue (Uploads, RunUploads).
// Queued files leave the directory: the byte budget bounds only what is
// still there, the queue has its own.
package record
