package replay

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
)

// Float16Bound is the relative rounding of maps recorded in float16
// (2^-11): with the recorded models and lossless frames (frame_format png)
// a replay's maps differ from the recorded ones by at most this much.
const Float16Bound = 1.0 / 2048

// MapStats compares one map stream of the recording, rebuilt at the
// frame's size, with the replay's frame-size maps.
type MapStats struct {
	Stream string
	Frames int
	// MaxRel and MeanRel are the largest and the mean relative difference
	// |replayed - recorded| / |recorded| over the pixels where both are
	// finite and the recorded value is not 0.
	MaxRel, MeanRel float64
	// NonFinite counts pixels where one side is finite and the other not.
	NonFinite int

	sum float64
	n   int64
}

// MapsResult is the comparison of the recorded maps with the replay's.
type MapsResult struct {
	Streams []MapStats // depth, laplace_scale, epistemic (those recorded)
	// Missing counts replayed frames with no recorded map (maps: [] or
	// a clip's first frames).
	Missing int
	// Err is the first error reading the recorded maps (the comparison
	// stopped there).
	Err error
}

// Write prints the comparison, one line per map stream.
func (r MapsResult) Write(w io.Writer) {
	if r.Err != nil {
		fmt.Fprintln(w, "maps: not compared:", r.Err)
		return
	}
	if len(r.Streams) == 0 {
		fmt.Fprintln(w, "maps: none recorded")
		return
	}
	for _, s := range r.Streams {
		fmt.Fprintf(w, "maps %s: %d frames, recorded vs replayed at the frame's size: max relative difference %.2e, mean %.2e",
			s.Stream, s.Frames, s.MaxRel, s.MeanRel)
		if s.NonFinite > 0 {
			fmt.Fprintf(w, ", %d pixels finite on one side only", s.NonFinite)
		}
		fmt.Fprintln(w)
	}
	if r.Missing > 0 {
		fmt.Fprintf(w, "maps: %d replayed frames have no recorded maps\n", r.Missing)
	}
	fmt.Fprintf(w, "(float16 recordings round to %.2e; JPEG frames or other models give the models other input)\n", Float16Bound)
}

// mapComparer walks the recording's map messages of one camera alongside
// the replay: the replay assesses the frames in recorded order, so the
// maps of frame seq are the next map messages with that sequence number.
type mapComparer struct {
	rd       *mcapsource.Reader
	camera   string
	channels map[uint16]mcaprec.MapChannel
	// ahead is a map message of a later frame, read while looking for the
	// current one's (its data copied: the reader reuses its buffer).
	ahead         *mcapsource.Message
	eof           bool
	msg           mcapsource.Message
	vals, rebuilt []float32
	stats         map[string]*MapStats
	res           MapsResult
}

func newMapComparer(path string, open mcapsource.Opener, camera string) (*mapComparer, error) {
	rd, err := mcapsource.OpenReaderFrom(path, open)
	if err != nil {
		return nil, err
	}
	return &mapComparer{rd: rd, camera: camera, channels: map[uint16]mcaprec.MapChannel{}, stats: map[string]*MapStats{}}, nil
}

func (c *mapComparer) close() { c.rd.Close() }

// next returns the next map message of the camera, nil at the end.
func (c *mapComparer) next() (*mcapsource.Message, error) {
	if m := c.ahead; m != nil {
		c.ahead = nil
		return m, nil
	}
	for !c.eof {
		if err := c.rd.Next(&c.msg); err != nil {
			if errors.Is(err, io.EOF) {
				c.eof = true
				return nil, nil
			}
			return nil, err
		}
		m := &c.msg
		if m.Camera == c.camera && (m.Stream == mcaprec.DepthStream || m.Stream == mcaprec.ScaleStream || m.Stream == mcaprec.EpistemicStream) {
			return m, nil
		}
	}
	return nil, nil
}

// frame compares the replay's maps of frame seq with the recorded ones.
func (c *mapComparer) frame(seq uint64, maps infer.Maps) {
	if c.res.Err != nil {
		return
	}
	target := uint32(seq) // MCAP sequences are the frame's mod 2^32
	found := false
	for {
		m, err := c.next()
		if err != nil {
			c.res.Err = err
			return
		}
		if m == nil {
			break
		}
		if d := int32(m.Sequence - target); d > 0 {
			ahead := *m
			ahead.Data = append([]byte(nil), m.Data...)
			c.ahead = &ahead
			break
		} else if d < 0 {
			continue // a frame the replay did not assess
		}
		found = true
		if err := c.compare(m, maps); err != nil {
			c.res.Err = fmt.Errorf("%s: frame %d: %w", m.Topic, seq, err)
			return
		}
	}
	if !found {
		c.res.Missing++
	}
}

func (c *mapComparer) compare(m *mcapsource.Message, maps infer.Maps) error {
	ch, ok := c.channels[m.ChannelID]
	if !ok {
		var err error
		if ch, err = mcaprec.ParseMapChannel(m.ChannelMetadata); err != nil {
			return err
		}
		c.channels[m.ChannelID] = ch
	}
	ri, err := mcaprec.ParseRawImage(m.Data)
	if err != nil {
		return err
	}
	if c.vals, err = ch.Decode(ri, c.vals); err != nil {
		return err
	}
	var w, h int
	if c.rebuilt, w, h, err = ch.FrameMap(c.vals, int(ri.Width), int(ri.Height), c.rebuilt); err != nil {
		return err
	}
	if w != maps.Width || h != maps.Height {
		return fmt.Errorf("recorded map rebuilt at %dx%d, the replay's is %dx%d", w, h, maps.Width, maps.Height)
	}
	replayed := maps.Scale
	switch m.Stream {
	case mcaprec.DepthStream:
		replayed = maps.Depth
	case mcaprec.EpistemicStream:
		replayed = maps.Epistemic
	}
	s := c.stats[m.Stream]
	if s == nil {
		s = &MapStats{Stream: m.Stream}
		c.stats[m.Stream] = s
	}
	s.Frames++
	for i, rec := range c.rebuilt {
		a, b := float64(replayed[i]), float64(rec)
		fa, fb := !math.IsNaN(a) && !math.IsInf(a, 0), !math.IsNaN(b) && !math.IsInf(b, 0)
		if fa != fb {
			s.NonFinite++
			continue
		}
		if !fa || b == 0 {
			continue
		}
		r := math.Abs(a-b) / math.Abs(b)
		s.MaxRel = math.Max(s.MaxRel, r)
		s.sum += r
		s.n++
	}
	return nil
}

// result returns the comparison so far.
func (c *mapComparer) result() MapsResult {
	r := c.res
	for _, name := range []string{mcaprec.DepthStream, mcaprec.ScaleStream, mcaprec.EpistemicStream} {
		if s := c.stats[name]; s != nil {
			if s.n > 0 {
				s.MeanRel = s.sum / float64(s.n)
			}
			r.Streams = append(r.Streams, *s)
		}
	}
	return r
}
