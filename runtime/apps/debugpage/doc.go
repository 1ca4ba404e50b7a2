// Package debugpage serves the runtime's debug HTTP endpoints: a live page
// (plain HTML and JavaScript embedded in the binary) showing the camera
// frame and the depth, aleatoric and epistemic heat maps with the zone
// outlines coloured by alert level and the recent events; /metrics in the
// Prometheus text format; /healthz and /readyz.
//
// Images are encoded as JPEG in the HTTP handlers, from the pipeline's
// snapshot, only when a client asks: the pipeline copies its maps into the
// snapshot only while someone is watching, at a bounded rate, and never
// waits for the page.
package debugpage
