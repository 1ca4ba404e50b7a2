// Package h264 decodes H.264 and H.265 access units to interleaved RGB24 with
// libavcodec and libswscale (through cgo, pkg-config libavcodec libavutil
// libswscale), and holds the pure-Go Annex-B / AVCC helpers that frame NAL
// units for it.
//
// The decoder keeps one C packet buffer and one RGB destination that grow to
// the largest access unit and picture seen, so decoding a stream allocates
// nothing per frame once it has run for a moment.
package h264
