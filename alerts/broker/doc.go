// Package broker runs an embedded MQTT broker (mochi-mqtt) for vehicles
// without one. It listens on 127.0.0.1 unless told otherwise, and accepts
// only the configured username/password accounts; anonymous clients are
// let in only when explicitly allowed.
package broker
