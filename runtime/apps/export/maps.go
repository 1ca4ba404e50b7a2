package export

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
)

// MapsDir holds the exported maps: DIR/<drive>/maps/<map>/%010d.npy, one
// per exported frame and recorded map (depth, laplace_scale, epistemic).
const MapsDir = "maps"

// writeMaps writes the recorded maps of the exported frames at the
// frame's size (one more pass of the recording open opens): each map is decoded (float16 or float32) and, when it was
// recorded at the resolution its model computed it at, resampled to the
// frame by the rule its channel's metadata names (mcaprec.MapChannel). The
// files are NumPy .npy arrays, float32 little-endian, shape (height,
// width). seqs maps a recorded sequence number (mod 2^32) to the exported
// frame index. It returns the number of maps written per stream.
func writeMaps(path string, open mcapsource.Opener, camera, driveDir string, seqs map[uint32]int) (map[string]int, error) {
	rd, err := mcapsource.OpenReaderFrom(path, open)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var m mcapsource.Message
	var vals, frame []float32
	written := map[string]int{}
	channels := map[uint16]mcaprec.MapChannel{}
	for {
		if err := rd.Next(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return written, nil
			}
			return written, err
		}
		if m.Camera != camera || (m.Stream != mcaprec.DepthStream && m.Stream != mcaprec.ScaleStream && m.Stream != mcaprec.EpistemicStream) {
			continue
		}
		index, ok := seqs[m.Sequence]
		if !ok {
			continue
		}
		ch, ok := channels[m.ChannelID]
		if !ok {
			if ch, err = mcaprec.ParseMapChannel(m.ChannelMetadata); err != nil {
				return written, fmt.Errorf("export %s: channel %s: %w", path, m.Topic, err)
			}
			channels[m.ChannelID] = ch
		}
		ri, err := mcaprec.ParseRawImage(m.Data)
		if err != nil {
			return written, fmt.Errorf("export %s: channel %s: frame %d: %w", path, m.Topic, m.Sequence, err)
		}
		if vals, err = ch.Decode(ri, vals); err != nil {
			return written, fmt.Errorf("export %s: channel %s: frame %d: %w", path, m.Topic, m.Sequence, err)
		}
		var w, h int
		if frame, w, h, err = ch.FrameMap(vals, int(ri.Width), int(ri.Height), frame); err != nil {
			return written, fmt.Errorf("export %s: channel %s: frame %d: %w", path, m.Topic, m.Sequence, err)
		}
		dir := filepath.Join(driveDir, MapsDir, m.Stream)
		if written[m.Stream] == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return written, err
			}
		}
		if err := writeNPY(filepath.Join(dir, fmt.Sprintf("%010d.npy", index)), frame, w, h); err != nil {
			return written, fmt.Errorf("export %s: %w", path, err)
		}
		written[m.Stream]++
	}
}

// writeNPY writes a float32 h x w array in NumPy's .npy format 1.0: the
// magic "\x93NUMPY", version 1.0, a little-endian uint16 header length,
// and a Python dict literal padded with spaces to a 64-byte boundary and
// ended by a newline, then the row-major data.
func writeNPY(path string, v []float32, w, h int) error {
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", h, w)
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	b := bufio.NewWriterSize(f, 1<<16)
	b.WriteString("\x93NUMPY\x01\x00")
	_ = binary.Write(b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	var buf [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(buf[:], math.Float32bits(x))
		b.Write(buf[:])
	}
	return errors.Join(b.Flush(), f.Close())
}

// parseIndexSeq reads an index line "<index> <seq> <capture>".
func parseIndexSeq(line string) (index int, seq uint64, err error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("index line %q", line)
	}
	if index, err = strconv.Atoi(f[0]); err != nil {
		return 0, 0, err
	}
	seq, err = strconv.ParseUint(f[1], 10, 64)
	return index, seq, err
}
