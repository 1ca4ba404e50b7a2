// Package service is the streaming core's service layer over HTTP: one
// listener bound at start (so a taken address fails before models load),
// /healthz answering "starting" during a start-up grace, then /metrics
// (Prometheus text format), /healthz and /readyz of the attached pipeline,
// and the camera routes of the control API (runtime/service/control) when
// attached. `didoedge run` wires it without any application; the debug
// page (runtime/apps/debugpage) is an optional handler mounted on it.
package service
