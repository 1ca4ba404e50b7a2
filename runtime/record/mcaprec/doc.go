// Package mcaprec is the on-disk layout of didoedge recordings, shared by
// the writer (runtime/record) and the reader (runtime/record/mcapsource): topic
// names per camera, the Foxglove message schemas (protobuf, as Foxglove's
// own SDKs write them) and an allocation-free codec for the three Foxglove
// messages a recording holds.
//
// Layout of one MCAP file (profile "", library "didoedge"):
//
//	/<camera>/image               foxglove.CompressedImage (protobuf): the frame, jpeg or png
//	/<camera>/depth               foxglove.RawImage (protobuf), metres (ROS REP 118)
//	/<camera>/laplace_scale       foxglove.RawImage (protobuf), Laplace scale b in metres
//	/<camera>/epistemic           foxglove.RawImage (protobuf), DIDO K/S (unitless, (0,1])
//	/<camera>/camera_calibration  foxglove.CameraCalibration (protobuf): intrinsics of the frame
//	/<camera>/<stream>            JSON, schema encoding jsonschema (events, zone_states: alerts/schema)
//
// Maps are 16UC1 images holding IEEE binary16 values or 32FC1 float32,
// at the resolution the models computed them (or the frame's); each map
// channel's metadata says which and how to resample the map to the frame
// (MapChannel: resolution, frame_size, input_size, content_rect, resize,
// value_encoding), so that a reader rebuilds the frame-size maps
// (MapChannel.FrameMap) exactly as inference made them. A new grid (frame
// size, models) opens new channels on the same topics.
//
// Every message of one frame has the frame's capture time as log and
// publish time, and the frame's sequence number (mod 2^32) as MCAP
// sequence. Metadata records: "didoedge" (recorder settings) and
// "didoedge.models" (sha256 of each model and of the calibration file).
//
// Protobuf was chosen over JSON for the images: a 192x640 float32 map is
// 480 KiB of bytes, which JSON would carry as 640 KiB of base64 text to be
// encoded per frame; Foxglove decodes protobuf channels from the
// FileDescriptorSet stored in the schema record.
package mcaprec
