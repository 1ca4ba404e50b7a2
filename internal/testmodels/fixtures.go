package testmodels

import (
	"strings"
	"testing"
)

// QuietCalibration is a calibration file that never alarms (K/S <= 1, only
// the OOD criterion).
const QuietCalibration = `version: 1
tau_e: 1
tau_a: 1000
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}
`

// AlarmCalibration is a calibration file that alarms on every pixel
// (K/S > 1e-6 everywhere).
const AlarmCalibration = `version: 1
tau_e: 0.000001
tau_a: 1000
scale_correction: 1
coverage: 0.9
levels:
  ood_fraction: {warn: {enter: 0.5, exit: 0.4}, critical: {enter: 0.9, exit: 0.8}}
`

// MustContain fails the test unless err is an error whose text holds
// every part (config errors must name the file and the key).
func MustContain(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

// ConfigYAML is a complete runtime config for the test models (32x64); %[1]s is the
// camera section, %[2]s the calibration file, %[3]s the zones.
const ConfigYAML = `camera:
%[1]s
inference:
  providers: [{name: cpu}]
  intra_op_threads: 1
depth:
  model: depth.onnx
  io:
    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth: {name: depth, meaning: metric_depth}
    features: [{name: features}]
auxue:
  model: auxue.onnx
  io:
    input: {name: image, height: 32, width: 64, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}
    depth_input: {name: depth, units: metres}
    scale: {name: scale, units: metres}
    epistemic: {name: epistemic}
alerts:
  vehicle: testcar
  camera: front
  calibration: %[2]s
%[3]s
  events: {fusion_time_constant: 0s, exit_inertia: 0s, min_episode: 0s, merge_window: 0s, camera_stall: 0s}
  mqtt: {broker: embedded, client_id: didoedge-test, stats_interval: 1s, close_timeout: 5s}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
http:
  listen: "off"
`

// ConfigZones is ConfigYAML's usual zones argument: a 1x2 grid.
const ConfigZones = `  grid: {rows: 1, cols: 2}`
