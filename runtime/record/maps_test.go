package record

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/mcapcheck"
	"github.com/didoedge/didoedge/pkg/mapgrid"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
)

// computedFrame is a frame of fw x fh whose maps were computed on a 32x16
// model input it is letterboxed into: the depth on a 16x8 output grid,
// the scale and K/S on the AuxUE's 32x16 grid, with the frame-size maps
// resampled from them as inference does.
type computedFrame struct {
	Frame
	grid mapgrid.Geometry
}

func newComputedFrame(fw, fh int, k int) *computedFrame {
	g := mapgrid.Fit(fw, fh, 32, 16, mapgrid.Letterbox)
	rng := rand.New(rand.NewPCG(uint64(k), uint64(fw)))
	depth, scale, e := make([]float32, 16*8), make([]float32, 32*16), make([]float32, 32*16)
	for i := range depth {
		depth[i] = 2 + 78*rng.Float32()
	}
	for i := range scale {
		scale[i] = 0.01 + 3*rng.Float32()
		e[i] = 1e-3 + rng.Float32()*(1-1e-3)
	}
	f := &computedFrame{grid: g}
	f.Frame = Frame{Camera: "front", Seq: uint64(k), Capture: time.Unix(1_800_000_000, 0).Add(time.Duration(k) * time.Second / 15),
		Width: fw, Height: fh, RGB: make([]uint8, 3*fw*fh), MapWidth: fw, MapHeight: fh,
		Depth: make([]float32, fw*fh), Scale: make([]float32, fw*fh), Epistemic: make([]float32, fw*fh),
		Computed: ComputedMaps{Grid: g, DepthWidth: 16, DepthHeight: 8, Depth: depth, AuxWidth: 32, AuxHeight: 16, Scale: scale, Epistemic: e}}
	_ = mapgrid.NewRemap(g, 16, 8).Apply(depth, f.Depth)
	_ = mapgrid.NewRemap(g, 32, 16).Apply(scale, f.Scale)
	_ = mapgrid.NewRemap(g, 32, 16).Apply(e, f.Epistemic)
	return f
}

// TestComputedMapsRoundTrip records maps at the defaults (their computed
// resolution, float16) and reads them back: each channel's metadata holds
// the grid, the maps decode to the computed ones within binary16's
// rounding (relative error <= 2^-11), and the frame-size maps rebuilt
// from them (MapChannel.FrameMap) are within the same bound of the
// frame-size maps inference made from the unrounded values (bilinear
// weights are non-negative and sum to 1, so a relative error bound on
// positive inputs holds for the result, plus float32 rounding). A new
// frame size opens new channels; a depth beyond binary16's range is
// recorded exactly in float32. Foxglove's reader sees 16UC1 images and
// the channel metadata.
func TestComputedMapsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	rec, err := New(Config{Mode: ModeContinuous, Dir: dir, Queue: 64}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sent []*computedFrame
	for k := 1; k <= 9; k++ {
		fw, fh := 48, 30
		if k > 6 {
			fw, fh = 40, 40 // another camera mode: another placement in the input
		}
		f := newComputedFrame(fw, fh, k)
		if k == 4 {
			f.Computed.Depth[5] = 1e5 // a far-off value: this map goes in float32
			f.Depth[0] = 1e5          // (the frame-size map is not compared for this frame)
		}
		sent = append(sent, f)
		if !rec.Frame(&f.Frame) {
			t.Fatalf("frame %d dropped", k)
		}
		waitIdle(t, rec)
	}
	closeRec(t, rec)
	if st := rec.Stats(); st.WideMaps != 1 || st.FramesWritten != 9 {
		t.Fatalf("stats %+v: want 1 wide map, 9 frames", st)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "rec-*.mcap"))
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}

	rd, err := mcapsource.OpenReader(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var m mcapsource.Message
	var vals, frame []float32
	perStream := map[string]int{}
	grids := map[uint16]mapgrid.Geometry{}
	const tol = 1.0 / 2048
	for {
		if err := rd.Next(&m); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		if m.Stream != mcaprec.DepthStream && m.Stream != mcaprec.ScaleStream && m.Stream != mcaprec.EpistemicStream {
			continue
		}
		f := sent[int(m.Sequence)-1]
		ch, err := mcaprec.ParseMapChannel(m.ChannelMetadata)
		if err != nil {
			t.Fatalf("%s: %v", m.Topic, err)
		}
		if ch.Resolution != mcaprec.ResolutionComputed || ch.Grid != f.grid || ch.Value != mcaprec.ValueFloat16 {
			t.Fatalf("%s seq %d: channel %+v, want the computed grid %+v in float16", m.Topic, m.Sequence, ch, f.grid)
		}
		grids[m.ChannelID] = ch.Grid
		ri, err := mcaprec.ParseRawImage(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if vals, err = ch.Decode(ri, vals); err != nil {
			t.Fatal(err)
		}
		perStream[m.Stream]++
		want, wantFrame := f.Computed.Scale, f.Scale
		switch m.Stream {
		case mcaprec.DepthStream:
			want, wantFrame = f.Computed.Depth, f.Depth
		case mcaprec.EpistemicStream:
			want, wantFrame = f.Computed.Epistemic, f.Epistemic
		}
		wide := m.Stream == mcaprec.DepthStream && m.Sequence == 4
		if wide != (ri.Encoding == mcaprec.Float32Encoding) {
			t.Fatalf("%s seq %d: encoding %s", m.Topic, m.Sequence, ri.Encoding)
		}
		for i, v := range vals {
			if wide && v != want[i] || math.Abs(float64(v-want[i])) > tol*float64(want[i]) {
				t.Fatalf("%s seq %d value %d: %v, computed %v", m.Topic, m.Sequence, i, v, want[i])
			}
		}
		if wide {
			continue
		}
		var fw, fh int
		if frame, fw, fh, err = ch.FrameMap(vals, int(ri.Width), int(ri.Height), frame); err != nil {
			t.Fatal(err)
		}
		if fw != f.Width || fh != f.Height {
			t.Fatalf("rebuilt %dx%d, frame %dx%d", fw, fh, f.Width, f.Height)
		}
		for i, v := range frame {
			if math.Abs(float64(v-wantFrame[i])) > (tol+1e-6)*float64(wantFrame[i]) {
				t.Fatalf("%s seq %d frame pixel %d: rebuilt %v, inference %v", m.Topic, m.Sequence, i, v, wantFrame[i])
			}
		}
	}
	if perStream["depth"] != 9 || perStream["laplace_scale"] != 9 || perStream["epistemic"] != 9 {
		t.Fatalf("maps per stream %v", perStream)
	}
	if len(grids) != 6 {
		t.Fatalf("%d map channels, want 3 per frame size", len(grids))
	}

	rep := mcapcheck.Check(t, files[0])
	d := rep.Decoded["/front/epistemic"]
	if d["encoding"] != mcaprec.Float16Encoding || d["width"].(float64) != 32 || d["step"].(float64) != 64 {
		t.Fatalf("Foxglove decodes %v", d)
	}
	if md := rep.Channels["/front/depth"].Metadata; md[mcaprec.ResolutionKey] != "computed" || md[mcaprec.InputSizeKey] != "32x16" ||
		md[mcaprec.ResizeKey] != mcaprec.ResizeRule || md["unit"] != "m" {
		t.Fatalf("Foxglove reads the channel metadata %v", md)
	}
}

// TestFrameResolutionMaps: map_resolution frame records the frame-size
// maps, labelled so, even when computed ones are offered.
func TestFrameResolutionMaps(t *testing.T) {
	dir := t.TempDir()
	rec, err := New(Config{Mode: ModeContinuous, Dir: dir, MapResolution: MapsFrame, MapPrecision: MapsFloat32}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := newComputedFrame(48, 30, 1)
	rec.Frame(&f.Frame)
	closeRec(t, rec)
	files, _ := filepath.Glob(filepath.Join(dir, "rec-*.mcap"))
	rd, err := mcapsource.OpenReader(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var m mcapsource.Message
	n := 0
	for rd.Next(&m) == nil {
		if m.Stream != mcaprec.DepthStream {
			continue
		}
		n++
		ch, err := mcaprec.ParseMapChannel(m.ChannelMetadata)
		ri, _ := mcaprec.ParseRawImage(m.Data)
		vals, derr := ch.Decode(ri, nil)
		if err != nil || derr != nil || ch.Resolution != mcaprec.ResolutionFrame || ri.Width != 48 || ri.Height != 30 {
			t.Fatalf("channel %+v (%v), %dx%d (%v)", ch, err, ri.Width, ri.Height, derr)
		}
		for i := range vals {
			if vals[i] != f.Depth[i] {
				t.Fatalf("pixel %d: %v, want %v exactly", i, vals[i], f.Depth[i])
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d depth maps", n)
	}
}
