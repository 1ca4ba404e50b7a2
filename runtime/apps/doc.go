// Package apps holds nothing itself: its subpackages are the applications
// built on the streaming core (runtime/stream), kept apart from it as
// gortsplib keeps its examples: demo (the simulated world end to end),
// bench (latency, soak, multi-camera, scenario, kernels), replay (recorded
// drives through the pipeline) and debugpage (the live view in a browser).
// Nothing in the streaming path imports them.
package apps
