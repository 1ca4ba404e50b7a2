package export

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // recorded frames
	_ "image/png"  // recorded frames
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
)

// Options configure KITTI.
type Options struct {
	// Dir is the data set to write (created; it must not hold a data set).
	Dir string
	// Camera selects the camera; "" takes the only one in the file.
	Camera string
	// Drive names the drive (default: the file's name without .mcap).
	Drive string
	// Split is the split the frames go to (default "val", the one
	// `didoedge calibrate` reads).
	Split string
	// Every keeps one frame in Every (default 1: all).
	Every int
	// Intrinsics are used when the recording has no camera calibration.
	Intrinsics *record.Intrinsics
	// Maps also writes the recorded maps of each exported frame at the
	// frame's size, as NumPy arrays under DIR/<drive>/maps/ (MapsDir).
	Maps bool
	// Open, when set, opens the recording (an object in S3: each of the
	// export's two or three passes, scan, frames and maps, is one streamed
	// GET); nil reads the local file of KITTI's path.
	Open mcapsource.Opener
}

// Result describes an export.
type Result struct {
	Camera        string
	Drive, Split  string
	Frames        int
	Width, Height int
	Intrinsics    record.Intrinsics
	// Truncated: the recording ended inside a chunk (a killed writer);
	// every complete chunk was exported.
	Truncated bool
	// Maps counts the maps written per stream (Options.Maps).
	Maps map[string]int
}

// FramesFile lists, per exported frame, "<index> <recorded seq>
// <capture unix ns>", in DIR/<drive>/.
const FramesFile = "frames.txt"

// KITTI writes the frames of one camera of a recording as a data set
// in dataset's KITTI layout: DIR/<drive>/image_02/data/%010d.png,
// splits/{train,val,test}.txt and meta.json, and DIR/<drive>/frames.txt
// with each frame's recorded sequence number and capture time. A
// recording has no depth ground truth: meta.json says so (sparse "none"),
// and calibrate sets tau_e and tau_a from it but keeps the Laplace scale
// correction, which needs ground truth.
func KITTI(ctx context.Context, path string, o Options) (Result, error) {
	if o.Split == "" {
		o.Split = "val"
	}
	if o.Every <= 0 {
		o.Every = 1
	}
	if o.Drive == "" {
		o.Drive = sanitizeDrive(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
	}
	if o.Dir == "" {
		return Result{}, errors.New("export: no output directory")
	}
	if o.Open == nil {
		o.Open = mcapsource.FileOpener(path)
	}
	if _, err := os.Stat(filepath.Join(o.Dir, dataset.MetaFile)); err == nil {
		return Result{}, fmt.Errorf("export: %s already holds a data set", o.Dir)
	}
	res, err := scanRecording(path, o)
	if err != nil {
		return res, err
	}
	res.Split = o.Split
	if res.Frames == 0 {
		return res, fmt.Errorf("export %s: no frames of camera %q", path, o.Camera)
	}
	meta := dataset.Meta{
		World: "recording", Width: res.Width, Height: res.Height, DepthScale: dataset.KITTIDepthScale,
		Intrinsics: dataset.Intrinsics{Fx: res.Intrinsics.Fx, Fy: res.Intrinsics.Fy, Cx: res.Intrinsics.Cx, Cy: res.Intrinsics.Cy},
		Semantic:   dataset.NoGroundTruth, Sparse: dataset.NoGroundTruth,
		Drives: []dataset.Drive{{Name: res.Drive, Split: o.Split, First: 0, Count: res.Frames, Stride: 1}},
	}
	src := &exportSource{path: path, o: o, w: res.Width, h: res.Height}
	if err := dataset.Generate(ctx, dataset.GenerateOptions{Dir: o.Dir, Meta: meta, Workers: 1}, src); err != nil {
		return res, fmt.Errorf("export %s: %w", path, err)
	}
	if err := src.writeIndex(filepath.Join(o.Dir, res.Drive, FramesFile)); err != nil {
		return res, fmt.Errorf("export %s: %w", path, err)
	}
	// The scan read the file to its end; the frame pass stops at the last
	// kept frame, before the cut it would see.
	res.Truncated = res.Truncated || src.truncated
	if o.Maps {
		seqs := make(map[uint32]int, len(src.index))
		for _, l := range src.index {
			i, seq, err := parseIndexSeq(l)
			if err != nil {
				return res, fmt.Errorf("export %s: %w", path, err)
			}
			seqs[uint32(seq)] = i // MCAP sequences are the frame's mod 2^32
		}
		if res.Maps, err = writeMaps(path, o.Open, res.Camera, filepath.Join(o.Dir, res.Drive), seqs); err != nil {
			return res, err
		}
	}
	return res, nil
}

// sanitizeDrive keeps a drive name the data-set reader accepts.
func sanitizeDrive(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || string(b) == "." || string(b) == ".." {
		return "recording"
	}
	return string(b)
}

// scanRecording counts the frames to export and reads the frame size and
// the intrinsics, without decoding pictures.
func scanRecording(path string, o Options) (Result, error) {
	res := Result{Drive: o.Drive}
	rd, err := mcapsource.OpenReaderFrom(path, o.Open)
	if err != nil {
		return res, err
	}
	defer rd.Close()
	cam := o.Camera
	var m mcapsource.Message
	cals := map[string]*mcaprec.CameraCalibration{} // the first of each camera
	n := 0
	for {
		if err := rd.Next(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return res, err
		}
		if m.Stream == mcaprec.CalibrationStream && cals[m.Camera] == nil {
			c, err := mcaprec.ParseCameraCalibration(m.Data)
			if err != nil {
				return res, fmt.Errorf("export %s: channel %s: %w", path, m.Topic, err)
			}
			cals[m.Camera] = &c
		}
		if m.Stream != mcaprec.ImageStream {
			continue
		}
		if cam == "" {
			cam = m.Camera
		}
		if m.Camera != cam {
			if o.Camera == "" {
				return res, fmt.Errorf("export %s: channel %s: the file has frames of cameras %s and %s: name one", path, m.Topic, cam, m.Camera)
			}
			continue
		}
		if n%o.Every == 0 {
			img, err := mcaprec.ParseCompressedImage(m.Data)
			if err != nil {
				return res, fmt.Errorf("export %s: channel %s: %w", path, m.Topic, err)
			}
			c, _, err := image.DecodeConfig(bytes.NewReader(img.Data))
			if err != nil {
				return res, fmt.Errorf("export %s: channel %s: frame %d: %w", path, m.Topic, m.Sequence, err)
			}
			if res.Frames == 0 {
				res.Width, res.Height = c.Width, c.Height
			} else if c.Width != res.Width || c.Height != res.Height {
				return res, fmt.Errorf("export %s: channel %s: frame %d is %dx%d, the first was %dx%d",
					path, m.Topic, m.Sequence, c.Width, c.Height, res.Width, res.Height)
			}
			res.Frames++
		}
		n++
	}
	res.Truncated = rd.Truncated()
	res.Camera = cam
	cal := cals[cam]
	switch {
	case cal != nil:
		in, err := cal.Intrinsics()
		if err != nil {
			return res, fmt.Errorf("export %s: camera %s: %w", path, cam, err)
		}
		if in.Width != res.Width || in.Height != res.Height {
			// Intrinsics scale with the picture (pixel centres at integers).
			sx, sy := float64(res.Width)/float64(in.Width), float64(res.Height)/float64(in.Height)
			in = record.Intrinsics{Width: res.Width, Height: res.Height, Fx: in.Fx * sx, Fy: in.Fy * sy,
				Cx: (in.Cx+0.5)*sx - 0.5, Cy: (in.Cy+0.5)*sy - 0.5}
		}
		res.Intrinsics = in
	case o.Intrinsics != nil:
		res.Intrinsics = *o.Intrinsics
		if in := res.Intrinsics; in.Width > 0 && in.Height > 0 && (in.Width != res.Width || in.Height != res.Height) {
			// Given for frames of another size: the same rule as above.
			sx, sy := float64(res.Width)/float64(in.Width), float64(res.Height)/float64(in.Height)
			res.Intrinsics = record.Intrinsics{Width: res.Width, Height: res.Height, Fx: in.Fx * sx, Fy: in.Fy * sy,
				Cx: (in.Cx+0.5)*sx - 0.5, Cy: (in.Cy+0.5)*sy - 0.5}
		}
	default:
		return res, fmt.Errorf("export %s: camera %s has no %s channel: give the intrinsics", path, cam, mcaprec.CalibrationStream)
	}
	if !(res.Intrinsics.Fx > 0 && res.Intrinsics.Fy > 0) {
		return res, fmt.Errorf("export %s: camera %s: intrinsics %+v need fx, fy > 0", path, cam, res.Intrinsics)
	}
	return res, nil
}

// exportSource feeds dataset.Generate (one worker, frames in order) from
// the replay source.
type exportSource struct {
	path      string
	o         Options
	w, h      int
	src       *mcapsource.Source
	frame     camera.Frame
	taken     int
	index     []string
	truncated bool
}

func (e *exportSource) OpenDrive(dataset.Drive) (dataset.FrameRenderer, error) {
	if e.src != nil {
		return nil, errors.New("one drive per recording")
	}
	s, err := mcapsource.Open(mcapsource.Config{Path: e.path, Open: e.o.Open, Camera: e.o.Camera})
	if err != nil {
		return nil, err
	}
	e.src = s
	return e, nil
}

// RenderFrame returns the next kept frame; Generate asks for them in order.
func (e *exportSource) RenderFrame(index int, s *dataset.Sample) error {
	for {
		if err := e.src.Next(context.Background(), &e.frame); err != nil {
			e.src.Close()
			return fmt.Errorf("frame %d: %w", index, err)
		}
		k := e.taken
		e.taken++
		if k%e.o.Every == 0 {
			break
		}
	}
	e.truncated = e.src.Truncated()
	e.index = append(e.index, fmt.Sprintf("%d %d %d", index, e.frame.Seq, e.frame.Capture.UnixNano()))
	s.Width, s.Height, s.RGB = e.frame.Width, e.frame.Height, e.frame.RGB
	return nil
}

func (e *exportSource) writeIndex(path string) error {
	if e.src != nil {
		e.truncated = e.truncated || e.src.Truncated()
		e.src.Close()
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "# index recorded_seq capture_unix_ns")
	for _, l := range e.index {
		fmt.Fprintln(w, l)
	}
	return errors.Join(w.Flush(), f.Close())
}

// Write prints what an export wrote (frames, size, drive, split,
// intrinsics) and what calibrate can do with it: file is the recording,
// dir the data set.
func (r Result) Write(w io.Writer, file, dir string) {
	fmt.Fprintf(w, "exported %d frames (%dx%d) of %s to %s, drive %s, split %s\n", r.Frames, r.Width, r.Height, file, dir, r.Drive, r.Split)
	fmt.Fprintf(w, "intrinsics fx %.4g fy %.4g cx %.4g cy %.4g\n", r.Intrinsics.Fx, r.Intrinsics.Fy, r.Intrinsics.Cx, r.Intrinsics.Cy)
	if len(r.Maps) > 0 {
		fmt.Fprintf(w, "maps at the frame's size (NumPy float32): depth %d, laplace_scale %d, epistemic %d in %s\n",
			r.Maps[mcaprec.DepthStream], r.Maps[mcaprec.ScaleStream], r.Maps[mcaprec.EpistemicStream], filepath.Join(dir, r.Drive, MapsDir))
	}
	if r.Truncated {
		fmt.Fprintln(w, "the recording ends inside a chunk (its writer was killed): every complete chunk was exported")
	}
	fmt.Fprintln(w, "no depth ground truth: `didoedge calibrate --data DIR` sets tau_e and tau_a from these frames; the Laplace coverage correction needs ground truth and keeps its configured value")
}
