package record

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/foxglove/mcap/go/mcap"

	"github.com/didoedge/didoedge/pkg/mapgrid"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
)

// run is the recorder's goroutine: it takes frames, JSON messages and
// control items in order, encodes and writes them (worker), and completes
// the open file when Close asks.
func (r *Recorder) run() {
	defer close(r.done)
	// One OS thread for the worker, so that its thread CPU clock measures
	// exactly the recording work (the compressors run on the caller's
	// goroutine: concurrency 1).
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	w := &r.w
	for {
		select {
		case c := <-r.ctrl:
			w.control(c)
			r.workerCPU.Store(int64(threadCPU()))
			continue
		default:
		}
		select {
		case c := <-r.ctrl:
			w.control(c)
		case s := <-r.frames:
			w.frame(s)
			r.free <- s
			r.workerCPU.Store(int64(threadCPU()))
		case <-r.stop:
			for {
				select {
				case c := <-r.ctrl:
					w.control(c)
					continue
				case s := <-r.frames:
					w.frame(s)
					r.free <- s
					continue
				default:
				}
				break
			}
			w.closeErr = w.finish()
			r.workerCPU.Store(int64(threadCPU()))
			return
		}
	}
}

// camState is what the worker knows of one camera.
type camState struct {
	image, calib int // channel spec indexes
	json         []int
	// maps are the depth, scale and epistemic channels of each grid the
	// camera's maps came on: a channel's metadata holds its grid, so a
	// new frame size or model grid opens new channels on the same topics.
	maps         map[mapKey][3]int
	intr         *Intrinsics
	calibVersion int
}

// mapKey tells map channels apart.
type mapKey struct {
	grid     mapgrid.Geometry // zero: frame-size maps
	relative bool
}

// worker is the state of the recorder's goroutine.
type worker struct {
	r     *Recorder
	cfg   Config
	comp  mcap.CustomCompressor
	specs []channelSpec
	seqs  []uint32 // per spec, for JSON messages
	cams  map[string]*camState
	// schema data, built once
	imgSchema, rawSchema, calSchema []byte

	meta     map[string]map[string]string // metadata records of new files (Options.Metadata, SetMetadata)
	file     *mcapFile
	fileCal  map[string]int // camera -> calibration version written into the current file
	fileEps  []string       // episodes seen while the file was open
	counter  int
	retryAt  time.Time // after a failed create, no new attempt before this
	closeErr error

	// event mode
	ring     ring
	open     map[string]bool
	endAt    uint64 // log time after which a clip without open episodes ends
	refs     []ringRef
	clipFrom uint64

	// encoding buffers
	rgba    *image.RGBA
	img     bytes.Buffer
	msg     []byte
	jpegOpt jpeg.Options
	png     png.Encoder
}

func (w *worker) init(r *Recorder, comp mcap.CustomCompressor) error {
	w.r, w.cfg, w.comp = r, r.cfg, comp
	w.cams = map[string]*camState{}
	w.meta = map[string]map[string]string{}
	for n, m := range r.opts.Metadata {
		w.meta[n] = m
	}
	w.fileCal = map[string]int{}
	w.open = map[string]bool{}
	w.ring = ring{preRoll: uint64(r.cfg.PreRoll), limit: r.cfg.RingBytes}
	w.jpegOpt = jpeg.Options{Quality: r.cfg.JPEGQuality}
	w.png = png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &pngPool{}}
	var err error
	if w.imgSchema, err = mcaprec.SchemaData(mcaprec.CompressedImageSchema); err != nil {
		return err
	}
	if w.rawSchema, err = mcaprec.SchemaData(mcaprec.RawImageSchema); err != nil {
		return err
	}
	if w.calSchema, err = mcaprec.SchemaData(mcaprec.CameraCalibrationSchema); err != nil {
		return err
	}
	return nil
}

type pngPool struct{ b *png.EncoderBuffer }

func (p *pngPool) Get() *png.EncoderBuffer  { b := p.b; p.b = nil; return b }
func (p *pngPool) Put(b *png.EncoderBuffer) { p.b = b }

func (w *worker) addSpec(s channelSpec) int {
	w.specs = append(w.specs, s)
	w.seqs = append(w.seqs, 0)
	return len(w.specs) - 1
}

// camera returns the state of a camera, declaring its channels.
func (w *worker) camera(id string) (*camState, error) {
	if c, ok := w.cams[id]; ok {
		return c, nil
	}
	if err := mcaprec.CheckCamera(id); err != nil {
		return nil, err
	}
	c := &camState{maps: map[mapKey][3]int{}}
	c.image = w.addSpec(channelSpec{topic: mcaprec.Topic(id, mcaprec.ImageStream), schemaName: mcaprec.CompressedImageSchema,
		schemaEncoding: mcaprec.ProtobufEncoding, schemaData: w.imgSchema, messageEnc: mcaprec.ProtobufEncoding,
		metadata: map[string]string{"camera": id}})
	c.calib = w.addSpec(channelSpec{topic: mcaprec.Topic(id, mcaprec.CalibrationStream), schemaName: mcaprec.CameraCalibrationSchema,
		schemaEncoding: mcaprec.ProtobufEncoding, schemaData: w.calSchema, messageEnc: mcaprec.ProtobufEncoding,
		metadata: map[string]string{"camera": id}})
	for _, s := range w.r.opts.Streams {
		c.json = append(c.json, w.addSpec(channelSpec{topic: mcaprec.Topic(id, s.Name), schemaName: s.SchemaName,
			schemaEncoding: mcaprec.JSONSchemaEncoding, schemaData: s.Schema, messageEnc: mcaprec.JSONEncoding,
			metadata: map[string]string{"camera": id}}))
	}
	w.cams[id] = c
	return c, nil
}

// mapChannels returns the camera's depth, scale and epistemic channels
// for the grid and units of frame s, declaring them on first use.
func (w *worker) mapChannels(id string, c *camState, s *slot) [3]int {
	k := mapKey{grid: s.grid, relative: s.relative}
	if ch, ok := c.maps[k]; ok {
		return ch
	}
	mc := mcaprec.MapChannel{Resolution: mcaprec.ResolutionFrame, Value: w.cfg.MapPrecision, MantissaBits: w.cfg.MapMantissaBits}
	if k.grid != (mapgrid.Geometry{}) {
		mc.Resolution, mc.Grid = mcaprec.ResolutionComputed, k.grid
	}
	raw := func(stream, unit, meaning string) int {
		md := mc.Metadata()
		md["camera"], md["unit"], md["meaning"] = id, unit, meaning
		return w.addSpec(channelSpec{topic: mcaprec.Topic(id, stream), schemaName: mcaprec.RawImageSchema,
			schemaEncoding: mcaprec.ProtobufEncoding, schemaData: w.rawSchema, messageEnc: mcaprec.ProtobufEncoding,
			metadata: md})
	}
	var ch [3]int
	if k.relative {
		ch[0] = raw(mcaprec.DepthStream, mcaprec.MapsUnitDimensionless, "predicted relative inverse depth (larger is nearer)")
		ch[1] = raw(mcaprec.ScaleStream, mcaprec.MapsUnitDimensionless, "Laplace scale b of the relative depth error over the relative depth (aleatoric)")
	} else {
		ch[0] = raw(mcaprec.DepthStream, mcaprec.MapsUnitMetres, "predicted depth")
		ch[1] = raw(mcaprec.ScaleStream, mcaprec.MapsUnitMetres, "Laplace scale b of the depth error (aleatoric)")
	}
	ch[2] = raw(mcaprec.EpistemicStream, mcaprec.MapsUnitDimensionless, "DIDO epistemic uncertainty K/S")
	c.maps[k] = ch
	return ch
}

func (w *worker) fail(err error) {
	w.r.writeErrs.Add(1)
	w.r.log.Error("recording", "err", err)
	if w.file != nil {
		w.file.abort()
		w.r.bytesWritten.Add(uint64(w.file.size()))
		w.r.current.Store(0)
		w.r.ho.finished(w.file.path, w.meta[mcaprec.ModelsMetadata]) // what it holds is uploaded (handover.go)
		w.file = nil
	}
	w.retryAt = time.Now().Add(time.Second)
}

// frame encodes and records one frame.
func (w *worker) frame(s *slot) {
	cam, err := w.camera(s.camera)
	if err != nil {
		w.r.log.Warn("record: frame dropped", "err", err)
		w.r.dropped.Add(1)
		return
	}
	t := uint64(s.capture.UnixNano())
	seq := uint32(s.seq) // MCAP sequence numbers are 32-bit; replay unwraps them
	w.beforeMessage(t)
	if len(s.rgb) != s.width*s.height*3 || s.width <= 0 {
		w.r.log.Warn("record: frame dropped", "camera", s.camera, "seq", s.seq,
			"err", fmt.Sprintf("%d RGB bytes for %dx%d", len(s.rgb), s.width, s.height))
		w.r.dropped.Add(1)
		return
	}
	if err := w.encodeImage(s); err != nil {
		w.r.log.Warn("record: frame dropped", "camera", s.camera, "seq", s.seq, "err", err)
		w.r.dropped.Add(1)
		return
	}
	w.msg = mcaprec.AppendCompressedImage(w.msg[:0], s.capture, s.camera, w.cfg.FrameFormat, w.img.Bytes())
	w.emit(cam.image, seq, t, w.msg)
	if len(s.depth) == 0 && len(s.scale) == 0 && len(s.e) == 0 {
		return
	}
	ch := w.mapChannels(s.camera, cam, s)
	for _, m := range [...]struct {
		spec   int
		px     []float32
		mw, mh int
	}{{ch[0], s.depth, s.depthW, s.depthH}, {ch[1], s.scale, s.auxW, s.auxH}, {ch[2], s.e, s.auxW, s.auxH}} {
		if len(m.px) == 0 {
			continue
		}
		if m.mw <= 0 || m.mh <= 0 || len(m.px) != m.mw*m.mh {
			w.r.log.Warn("record: map skipped", "topic", w.specs[m.spec].topic, "err",
				fmt.Sprintf("%d values for %dx%d", len(m.px), m.mw, m.mh))
			continue
		}
		w.msg = w.appendMap(w.msg[:0], s, m.mw, m.mh, m.px)
		w.emit(m.spec, seq, t, w.msg)
	}
}

// appendMap encodes one map at the configured precision: binary16, or
// exact float32 for a map beyond binary16's range (the message's encoding
// says which), or float32 at map_mantissa_bits.
func (w *worker) appendMap(dst []byte, s *slot, mw, mh int, px []float32) []byte {
	if w.cfg.MapPrecision == MapsFloat16 {
		if out, ok := mcaprec.AppendRawImage16F(dst, s.capture, s.camera, mw, mh, px); ok {
			return out
		}
		w.r.wideMaps.Add(1)
		return mcaprec.AppendRawImage32F(dst, s.capture, s.camera, mw, mh, px, 23)
	}
	return mcaprec.AppendRawImage32F(dst, s.capture, s.camera, mw, mh, px, w.cfg.MapMantissaBits)
}

func (w *worker) encodeImage(s *slot) error {
	wd, ht := s.width, s.height
	if w.rgba == nil || w.rgba.Rect.Dx() != wd || w.rgba.Rect.Dy() != ht {
		w.rgba = image.NewRGBA(image.Rect(0, 0, wd, ht))
	}
	pix := w.rgba.Pix
	for i, j := 0, 0; i < len(s.rgb); i, j = i+3, j+4 {
		pix[j], pix[j+1], pix[j+2], pix[j+3] = s.rgb[i], s.rgb[i+1], s.rgb[i+2], 255
	}
	w.img.Reset()
	if w.cfg.FrameFormat == "png" {
		return w.png.Encode(&w.img, w.rgba)
	}
	return jpeg.Encode(&w.img, w.rgba, &w.jpegOpt)
}

// emit routes one message: into the pre-roll ring (event mode) and into
// the open file, if any.
func (w *worker) emit(spec int, seq uint32, t uint64, data []byte) {
	if w.cfg.Mode == ModeEvent {
		w.ring.push(spec, t, seq, data)
		if w.file == nil {
			return
		}
	}
	w.write(spec, seq, t, data)
}

// write appends a message to the current file, opening one in continuous
// mode.
func (w *worker) write(spec int, seq uint32, t uint64, data []byte) {
	if w.file == nil {
		if w.cfg.Mode == ModeEvent || !w.openFile(t) {
			return
		}
	}
	cam := w.camOfImage(spec)
	if cam != nil && cam.intr != nil && w.fileCal[w.specs[spec].metadata["camera"]] != cam.calibVersion {
		id := w.specs[spec].metadata["camera"]
		cal := mcaprec.AppendCameraCalibration(nil, time.Unix(0, int64(t)), id, *cam.intr)
		if err := w.file.write(cam.calib, &w.specs[cam.calib], 0, t, cal); err != nil {
			w.fail(err)
			return
		}
		w.fileCal[id] = cam.calibVersion
	}
	if err := w.file.write(spec, &w.specs[spec], seq, t, data); err != nil {
		w.fail(err)
		return
	}
	w.r.current.Store(w.file.size())
	if cam != nil {
		w.r.written.Add(1)
		w.file.frames++
	}
}

// camOfImage returns the camera whose image channel is spec, else nil.
func (w *worker) camOfImage(spec int) *camState {
	c := w.cams[w.specs[spec].metadata["camera"]]
	if c != nil && c.image == spec {
		return c
	}
	return nil
}

// beforeMessage rotates the file and ends clips, at message boundaries.
func (w *worker) beforeMessage(t uint64) {
	if w.file == nil {
		return
	}
	if w.cfg.Mode == ModeEvent && len(w.open) == 0 && t > w.endAt {
		w.closeFile()
		return
	}
	if w.file.size() >= w.cfg.RotateBytes || (w.file.start != 0 && t >= w.file.start && t-w.file.start >= uint64(w.cfg.RotateTime)) {
		w.closeFile()
		if w.cfg.Mode == ModeEvent {
			w.openFile(t) // the clip goes on in a new file
		}
	}
}

func (w *worker) control(c ctrlItem) {
	switch c.kind {
	case ctrlMetadata:
		w.meta[c.id] = c.meta
		if w.file != nil {
			if err := w.file.w.WriteMetadata(&mcap.Metadata{Name: c.id, Metadata: c.meta}); err != nil {
				w.fail(fmt.Errorf("metadata %s: %w", c.id, err))
			}
		}
	case ctrlCamera:
		cam, err := w.camera(c.camera)
		if err != nil {
			w.r.log.Warn("record: camera", "err", err)
			return
		}
		in := c.intr
		cam.intr = &in
		cam.calibVersion++
	case ctrlJSON:
		cam, err := w.camera(c.camera)
		if err != nil {
			return
		}
		t := uint64(c.t.UnixNano())
		w.beforeMessage(t)
		spec := cam.json[c.stream]
		w.seqs[spec]++
		w.emit(spec, w.seqs[spec], t, c.payload)
	case ctrlOpened, ctrlUpdated:
		if w.open[c.id] {
			return
		}
		w.open[c.id] = true
		w.noteEpisode(c.id)
		if w.cfg.Mode != ModeEvent {
			return
		}
		t := uint64(c.t.UnixNano())
		if w.file == nil {
			from := uint64(0)
			if t > uint64(w.cfg.PreRoll) {
				from = t - uint64(w.cfg.PreRoll)
			}
			w.refs = w.ring.since(from, w.refs[:0])
			start := t
			if len(w.refs) > 0 {
				start = w.refs[0].e.logTime
			}
			if !w.openFile(start) {
				return
			}
			w.r.clips.Add(1)
			w.noteEpisode(c.id)
			for _, ref := range w.refs {
				w.write(ref.spec, ref.e.seq, ref.e.logTime, ref.e.data)
				if w.file == nil {
					break
				}
			}
			clear(w.refs)
		}
	case ctrlEnded:
		if !w.open[c.id] {
			return
		}
		delete(w.open, c.id)
		if len(w.open) == 0 {
			w.endAt = uint64(c.t.UnixNano()) + uint64(w.cfg.PostRoll)
		}
	}
}

func (w *worker) noteEpisode(id string) {
	if w.file == nil {
		return
	}
	for _, e := range w.fileEps {
		if e == id {
			return
		}
	}
	w.fileEps = append(w.fileEps, id)
}

// openFile starts a new recording whose first message is at log time t,
// after making room for it within the budget.
func (w *worker) openFile(t uint64) bool {
	now := w.r.opts.Now()
	if now.Before(w.retryAt) {
		return false
	}
	w.enforceBudget("")
	w.counter++
	name := fmt.Sprintf("%s%s-%04d", filePrefix, now.UTC().Format("20060102T150405.000Z"), w.counter)
	if w.cfg.Mode == ModeEvent {
		name += "-clip"
	}
	path := filepath.Join(w.cfg.Dir, name+fileSuffix)
	w.r.ho.setOpen(path) // before it exists: never offered for upload while open
	f, err := createFile(path, w.cfg.ChunkBytes, w.comp, w.metadata(now, t))
	if err != nil {
		w.r.ho.setOpen("")
		w.fail(err)
		return false
	}
	w.file = f
	clear(w.fileCal)
	w.fileEps = w.fileEps[:0]
	for id := range w.open {
		w.fileEps = append(w.fileEps, id)
	}
	w.r.log.Info("recording", "file", path)
	return true
}

func (w *worker) metadata(now time.Time, t uint64) []mcap.Metadata {
	c := w.cfg
	rec := map[string]string{
		"mode": c.Mode, "frame_format": c.FrameFormat, "jpeg_quality": strconv.Itoa(c.JPEGQuality),
		"maps": strings.Join(c.Maps, ","), "map_resolution": c.MapResolution, "map_precision": c.MapPrecision, "compression": c.Compression, "chunk_bytes": strconv.FormatInt(c.ChunkBytes, 10),
		"created": now.UTC().Format(time.RFC3339Nano), "first_log_time_ns": strconv.FormatUint(t, 10),
		"seq": "MCAP message sequence = frame sequence number mod 2^32",
	}
	if c.Mode == ModeEvent {
		rec["pre_roll"], rec["post_roll"] = c.PreRoll.String(), c.PostRoll.String()
	}
	out := []mcap.Metadata{{Name: mcaprec.RecorderMetadata, Metadata: rec}}
	names := make([]string, 0, len(w.meta))
	for n := range w.meta {
		names = append(names, n)
	}
	slicesSort(names)
	for _, n := range names {
		out = append(out, mcap.Metadata{Name: n, Metadata: w.meta[n]})
	}
	return out
}

// closeFile completes the current file.
func (w *worker) closeFile() {
	f := w.file
	if f == nil {
		return
	}
	w.file = nil
	var extra []mcap.Metadata
	if len(w.fileEps) > 0 {
		extra = append(extra, mcap.Metadata{Name: mcaprec.EpisodesMetadata,
			Metadata: map[string]string{"ids": strings.Join(w.fileEps, ",")}})
	}
	err := f.close(extra)
	w.r.bytesWritten.Add(uint64(f.size()))
	w.r.current.Store(0)
	w.r.ho.finished(f.path, w.meta[mcaprec.ModelsMetadata]) // to the upload queue (handover.go)
	if err != nil {
		w.r.writeErrs.Add(1)
		w.r.log.Error("recording", "err", err)
		return
	}
	w.r.filesClosed.Add(1)
	w.r.log.Info("recording complete", "file", f.path, "bytes", f.size(), "frames", f.frames)
}

// finish completes the open file at Close.
func (w *worker) finish() error {
	before := w.r.writeErrs.Load()
	w.closeFile()
	if w.r.writeErrs.Load() != before {
		return errors.New("record: the last file did not close cleanly (see the log)")
	}
	return nil
}
