package profiling

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// HeapPeak samples the live heap every second and writes a heap
// profile to path whenever it is 5 % above the largest seen so far, so that
// the file shows what was live at the peak. The returned func stops it.
func HeapPeak(ctx context.Context, path string, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var peak uint64
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if live := sample[0].Value.Uint64(); live > peak+peak/20 {
				peak = live
				if err := writeHeapProfile(path); err != nil {
					log.Warn("heap profile", "path", path, "err", err)
					return
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("--memprofile %q: %w", path, err)
	}
	return f.Close()
}

// StartCPU starts a CPU profile into path (--cpuprofile); stop
// ends it and closes the file.
func StartCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %q: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
