package record

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera/sim"
)

// benchFrame is the reference frame: 192x640 RGB with all three maps.
func benchFrame() *synthFrame { return newSynth("front", 640, 192, 640, 192) }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFrameCall is what the pipeline pays per frame: Frame copies the
// frame and its maps into a slot (the worker is simulated by handing the
// slot straight back). It must allocate nothing.
func BenchmarkFrameCall(b *testing.B) {
	rec, err := New(Config{Mode: ModeContinuous, Dir: b.TempDir()}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	// Stop the worker so that the benchmark owns the queue.
	rec.closed.Store(true)
	close(rec.stop)
	<-rec.done
	rec.closed.Store(false)
	s := benchFrame()
	f := s.fill(1, time.Unix(1_800_000_000, 0), 15)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if !rec.Frame(f) {
			b.Fatal("dropped")
		}
		rec.free <- <-rec.frames
	}
}

// BenchmarkRecordFrame is the recorder's whole cost per frame at the
// defaults (JPEG quality 90, zstd, all three maps): the caller's copy plus
// the worker's encoding, compression and writing, as process CPU time per
// frame, and the bytes it writes per frame and per second at 15 fps.
func BenchmarkRecordFrame(b *testing.B) {
	for _, v := range []struct {
		name string
		cfg  Config
	}{
		{"defaults", Config{}},
		{"lz4", Config{Compression: "lz4"}},
		{"maps-10-bits", Config{MapMantissaBits: 10}},
		{"no-maps", Config{Maps: []string{}}},
	} {
		b.Run(v.name, func(b *testing.B) { benchmarkRecordFrame(b, v.cfg) })
	}
}

func benchmarkRecordFrame(b *testing.B, cfg Config) {
	cfg.Mode, cfg.Dir = ModeContinuous, b.TempDir()
	rec, err := New(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	s := benchFrame()
	t0 := time.Unix(1_800_000_000, 0)
	// Warm up one frame (buffers, encoder tables).
	rec.Frame(s.fill(0, t0, 15))
	waitIdle(b, rec)
	frames := make([]*Frame, 4)
	for i := range frames {
		frames[i] = &benchFrames(b, i).Frame
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		f := frames[i%len(frames)]
		f.Seq, f.Capture = uint64(i+1), t0.Add(time.Duration(i+1)*time.Second/15)
		for !rec.Frame(f) {
			time.Sleep(50 * time.Microsecond)
		}
	}
	waitIdle(b, rec)
	closeRec(b, rec)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	st := rec.Stats()
	bytesPerFrame := float64(st.BytesWritten) / float64(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/frame")
	b.ReportMetric(bytesPerFrame, "B/frame")
	b.ReportMetric(bytesPerFrame*15/1e6, "MB/s@15fps")
}

// benchFrames are frames of the simulated outdoor world (camera/sim: the
// picture and its dense depth, sky at 80 m as a depth network predicts a
// far value), different for each i so that the encoders do not see one
// frame over and over. The Laplace scale and K/S maps are functions of the
// depth with a pseudo-random factor on every pixel: like network outputs,
// their low mantissa bits carry no pattern, which is the hard case for the
// chunk compression.
func benchFrames(tb testing.TB, i int) *synthFrame {
	r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: sim.DefaultWidth, Height: sim.DefaultHeight, Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	sf := sim.NewFrame(sim.DefaultWidth, sim.DefaultHeight)
	if err := r.Render(10*i, sf); err != nil {
		tb.Fatal(err)
	}
	s := benchFrame()
	copy(s.RGB, sf.RGB)
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	for p, d := range sf.Depth {
		if d == 0 {
			d = 80
		}
		s.Depth[p] = d * (1 + 0.02*float32(rng.NormFloat64()))
		s.Scale[p] = 0.03 * d * (1 + 0.3*rng.Float32())
		s.Epistemic[p] = min(1, 0.05+0.1*rng.Float32()+d/200)
	}
	return s
}

// BenchmarkRecord15fps feeds 192x640 frames with all maps at 15 fps in
// real time (3 s per iteration) and reports the frames dropped (goal 0)
// and the share of one core the recorder used.
func BenchmarkRecord15fps(b *testing.B) {
	var dropped, submitted uint64
	var cpu, wall time.Duration
	for range b.N {
		rec, err := New(Config{Mode: ModeContinuous, Dir: b.TempDir()}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		frames := []*synthFrame{benchFrames(b, 0), benchFrames(b, 1), benchFrames(b, 2)}
		t0 := time.Now()
		cpu0 := cpuTime()
		tick := time.NewTicker(time.Second / 15)
		for k := 1; k <= 45; k++ {
			<-tick.C
			f := &frames[k%3].Frame
			f.Seq, f.Capture = uint64(k), time.Now()
			rec.Frame(f)
		}
		tick.Stop()
		closeRec(b, rec)
		cpu += cpuTime() - cpu0
		wall += time.Since(t0)
		st := rec.Stats()
		dropped += st.FramesDropped
		submitted += st.FramesSubmitted
	}
	b.ReportMetric(float64(dropped), "dropped")
	b.ReportMetric(float64(submitted), "submitted")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
}
