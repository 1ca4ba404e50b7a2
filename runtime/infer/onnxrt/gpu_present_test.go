package onnxrt

import (
	"testing"
	"testing/fstest"
)

// TestGPUPresent: each sign of an NVIDIA GPU, on a fake root, alone.
func TestGPUPresent(t *testing.T) {
	file := &fstest.MapFile{Data: []byte{}}
	cases := []struct {
		name    string
		root    fstest.MapFS
		devices int // the CUDA driver's answer
		want    bool
	}{
		{"nothing", fstest.MapFS{"proc/cpuinfo": file}, -1, false},
		{"discrete GPU driver entry", fstest.MapFS{"proc/driver/nvidia/gpus/0000:01:00.0/information": file}, -1, true},
		{"discrete GPU device node", fstest.MapFS{"dev/nvidia0": file}, -1, true},
		{"nvidiactl alone is no GPU", fstest.MapFS{"dev/nvidiactl": file}, -1, false},
		{"Jetson nvhost nodes", fstest.MapFS{"dev/nvhost-ctrl-gpu": file, "dev/nvhost-gpu": file}, -1, true},
		{"Jetson Orin device tree", fstest.MapFS{"proc/device-tree/compatible": {Data: []byte("nvidia,p3768-0000+p3767-0000\x00nvidia,p3767-0000\x00nvidia,tegra234\x00")}}, -1, true},
		{"another SoC's device tree", fstest.MapFS{"proc/device-tree/compatible": {Data: []byte("raspberrypi,5-model-b\x00brcm,bcm2712\x00")}}, -1, false},
		{"a vendor string that only contains tegra", fstest.MapFS{"proc/device-tree/compatible": {Data: []byte("acme,nvidia,tegra-like\x00")}}, -1, false},
		{"the CUDA driver counts a device", fstest.MapFS{}, 1, true},
		{"the CUDA driver counts none", fstest.MapFS{}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := gpuPresent(tc.root, func() int { return tc.devices }); got != tc.want {
				t.Fatalf("gpuPresent = %v, want %v", got, tc.want)
			}
		})
	}
	if gpuPresent(fstest.MapFS{}, nil) {
		t.Fatal("an empty root without a driver has a GPU")
	}
}
