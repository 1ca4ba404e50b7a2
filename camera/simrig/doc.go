// Package simrig is the simulated camera rig: scripted scenarios of the
// simulated world (phases of worlds, fog, obstacles and image corruptions
// in a loop, Scenario) served as live RTSP cameras (StartCamera,
// StartCameras, StartRigCamera) for the demo, the benchmarks and replays.
// It imports no data-set code: corruptions come from the caller
// (Corruptor; dataset/corrupt's implements it).
package simrig
