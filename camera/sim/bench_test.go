package sim

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time. The benchmarks report it
// per frame next to the wall time because on a shared, loaded machine the
// wall time mostly measures the other tenants.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchmarkRender(b *testing.B, world string) { benchmarkRenderCamera(b, world, "") }

func benchmarkRenderCamera(b *testing.B, world, camera string) {
	r, err := NewRenderer(Config{World: world, Width: DefaultWidth, Height: DefaultHeight, Seed: 1, Camera: camera})
	if err != nil {
		b.Fatal(err)
	}
	f := NewFrame(DefaultWidth, DefaultHeight)
	if err := r.Render(0, f); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if err := r.Render(i%500, f); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-c0)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkRenderOutdoor192x640 renders the road world with all outputs
// (RGB, dense depth, LiDAR ground truth, semantics). Goal: <= 33 ms/op on 2
// cores, 0 allocs/op.
func BenchmarkRenderOutdoor192x640(b *testing.B) { benchmarkRender(b, WorldOutdoor) }

// BenchmarkRenderIndoor192x640 renders the room world with all outputs.
func BenchmarkRenderIndoor192x640(b *testing.B) { benchmarkRender(b, WorldIndoor) }

// BenchmarkRenderNewCam192x640 is the outdoor world through the new camera
// (colour pipeline and sensor noise per pixel) at the training size.
func BenchmarkRenderNewCam192x640(b *testing.B) { benchmarkRenderCamera(b, WorldOutdoor, CameraNewCam) }
