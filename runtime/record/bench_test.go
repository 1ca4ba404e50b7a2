package record

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/pkg/mapgrid"
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

// BenchmarkRecordVolume is the recording volume of issue 33: bytes per
// frame for camera frames of 640x192, 960x540 and 1920x1080 whose maps a
// 640x192 model computed (the bundled models: depth and AuxUE on the
// input grid, frames stretched into it). "frame-float32" is the former
// default (maps resampled to the frame, exact float32), "defaults" the
// maps on the models' grid in float16. JPEG quality 90, zstd.
func BenchmarkRecordVolume(b *testing.B) {
	for _, size := range [][2]int{{640, 192}, {960, 540}, {1920, 1080}} {
		frames := make([]*Frame, 3)
		for i := range frames {
			frames[i] = modelFrame(b, i, size[0], size[1])
		}
		for _, v := range []struct {
			name string
			cfg  Config
		}{
			{"frame-float32", Config{MapResolution: MapsFrame, MapPrecision: MapsFloat32}},
			{"defaults", Config{}},
		} {
			b.Run(fmt.Sprintf("%dx%d/%s", size[0], size[1], v.name), func(b *testing.B) {
				benchmarkRecordFrames(b, v.cfg, frames)
			})
		}
	}
}

// modelFrame is frame i of the simulated outdoor world at fw x fh with
// maps as a 640x192 model computes them: benchFrames' maps on the model
// grid (the world rendered at 640x192), and the frame-size maps resampled
// from them as inference does (mapgrid.Remap, stretched).
func modelFrame(tb testing.TB, i, fw, fh int) *Frame {
	native := benchFrames(tb, i)
	r, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: fw, Height: fh, Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	sf := sim.NewFrame(fw, fh)
	if err := r.Render(10*i, sf); err != nil {
		tb.Fatal(err)
	}
	const mw, mh = 640, 192
	g := mapgrid.Fit(fw, fh, mw, mh, mapgrid.Stretch)
	f := &Frame{Camera: "front", Width: fw, Height: fh, RGB: sf.RGB, MapWidth: fw, MapHeight: fh,
		Depth: make([]float32, fw*fh), Scale: make([]float32, fw*fh), Epistemic: make([]float32, fw*fh),
		Computed: ComputedMaps{Grid: g, DepthWidth: mw, DepthHeight: mh, Depth: native.Depth,
			AuxWidth: mw, AuxHeight: mh, Scale: native.Scale, Epistemic: native.Epistemic}}
	remap := mapgrid.NewRemap(g, mw, mh)
	for _, m := range [][2][]float32{{native.Depth, f.Depth}, {native.Scale, f.Scale}, {native.Epistemic, f.Epistemic}} {
		if err := remap.Apply(m[0], m[1]); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

func benchmarkRecordFrame(b *testing.B, cfg Config) {
	frames := make([]*Frame, 4)
	for i := range frames {
		frames[i] = &benchFrames(b, i).Frame
	}
	benchmarkRecordFrames(b, cfg, frames)
}

// benchmarkRecordFrames records frames over and over (new sequence numbers
// and times) and reports CPU and bytes per frame.
func benchmarkRecordFrames(b *testing.B, cfg Config, frames []*Frame) {
	cfg.Mode, cfg.Dir = ModeContinuous, b.TempDir()
	rec, err := New(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	// Warm up one frame (buffers, encoder tables); the file's first bytes
	// are counted with the rest.
	frames[0].Seq, frames[0].Capture = 0, t0
	rec.Frame(frames[0])
	waitIdle(b, rec)
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
