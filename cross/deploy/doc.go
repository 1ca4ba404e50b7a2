// Package deploy holds no code: its tests check the Kubernetes manifests
// in cross/deploy/calibrate (typed, strict decoding against the Kubernetes API
// types, and the didoedge config in the ConfigMap parsed as the runtime
// parses it).
package deploy
