package upload

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/objstore/s3test"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkUploadCPU measures the vehicle-side CPU of the queue per MB
// recorded: Enqueue (one read through CRC-64/NVME) plus the upload (read,
// any payload hashing of the request signing, the HTTP client), against a
// gateway in another process (its CPU is not counted). Reported as
// cpu-ms/MB: at a recording rate of R MB/s the uploader takes R x that of
// CPU per second. Two shapes: a clip sent in one PUT (8 MiB, below the
// 16 MiB part size) and one of 3 parts (40 MiB, a multipart upload).
func BenchmarkUploadCPU(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"put-8MiB", 8 << 20}, {"multipart-40MiB", 40 << 20}} {
		b.Run(bc.name, func(b *testing.B) { benchUpload(b, bc.size) })
	}
}

func benchUpload(b *testing.B, size int) {
	srv := s3test.Start(b)
	srv.MakeBucket(b, "bench")
	c, err := objstore.New(srv.Config(), nil)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	q, err := Open(Config{Dir: filepath.Join(dir, "q"), Target: "s3://bench/clips", PartSize: 16 << 20}, c, nil)
	if err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		src := filepath.Join(dir, fmt.Sprintf("clip-%d.mcap", i))
		clip(b, src, size, uint64(i))
		b.StartTimer()
		before := cpuTime()
		if err := q.Enqueue(src, identity); err != nil {
			b.Fatal(err)
		}
		if err := q.Run(context.Background(), true); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - before
	}
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N)/(float64(size)/(1<<20)), "cpu-ms/MB")
}
