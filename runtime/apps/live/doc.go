// Package live is the live view of a running pipeline: a Foxglove
// WebSocket server (the published protocol foxglove.websocket.v1,
// https://github.com/foxglove/ws-protocol/blob/main/docs/spec.md) with one
// listener for every camera, and a control API over HTTP (JSON) on the
// same listener that changes zones, thresholds, event timings and
// profiles at run time through the pipeline's reload path.
//
// Channels per camera, named as in the recordings (runtime/record/mcaprec):
//
//	/<camera>/image               foxglove.CompressedImage (protobuf, jpeg)
//	/<camera>/depth               foxglove.RawImage (protobuf, 32FC1, metres)
//	/<camera>/laplace_scale       foxglove.RawImage (protobuf, 32FC1, metres)
//	/<camera>/epistemic           foxglove.RawImage (protobuf, 32FC1, K/S)
//	/<camera>/camera_calibration  foxglove.CameraCalibration (protobuf; with record.intrinsics)
//	/<camera>/events              didoedge.event/1 (json, as published on MQTT)
//	/<camera>/zone_states         didoedge.state/1 (json)
//	/<camera>/zone_annotations    foxglove.ImageAnnotations (json): zones coloured by level, frame pixels
//	/<camera>/zone_annotations_map foxglove.ImageAnnotations (json): the same at the maps' size
//	/<camera>/zone_risk           didoedge.zone_risk/1 (json): every zone per frame (plots)
//
// The pipeline hands a frame over only while a client subscribes to one
// of the camera's frame channels (stream.Tap.Wants: an atomic load, no
// allocation otherwise); it copies the subscribed parts into one of a few
// preallocated slots, or drops the frame (counted) when every slot is
// busy. One encoder goroutine encodes each subscribed channel once and
// hands the bytes to every subscriber's bounded queue; a client that
// cannot keep up loses its own messages (counted), never the pipeline's
// time or another client's.
package live
