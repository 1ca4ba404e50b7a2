package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foxglove/mcap/go/mcap"

	"github.com/didoedge/didoedge/internal/mcaprec"
)

// Intrinsics are the pinhole intrinsics of a camera's frames.
type Intrinsics = mcaprec.Intrinsics

// Frame is what the pipeline hands over for one assessed frame. The
// recorder copies it before Frame returns: the caller keeps and reuses
// every buffer.
type Frame struct {
	// Camera is the camera id (letters, digits, _): topics are /<camera>/...
	Camera  string
	Seq     uint64
	Capture time.Time
	// RGB is the frame, interleaved 8-bit, Width*Height*3 bytes.
	Width, Height int
	RGB           []uint8
	// Maps are row-major MapWidth x MapHeight; nil ones are not recorded.
	MapWidth, MapHeight int
	Depth               []float32 // metres
	Scale               []float32 // Laplace scale b, metres
	Epistemic           []float32 // DIDO K/S
}

// JSONStream declares a JSON channel kind, one per camera:
// /<camera>/<Name>, schema encoding jsonschema.
type JSONStream struct {
	Name       string // events, zone_states ...
	SchemaName string // the schema record's name, e.g. didoedge.event/1
	Schema     []byte // the JSON Schema document (alerts/schema)
}

// Options are the parts of a recorder that are not in the config file.
type Options struct {
	// Streams are the JSON channels the caller will use with JSON.
	Streams []JSONStream
	// Metadata is written as MCAP metadata records at the start of every
	// file, e.g. "didoedge.models" from ModelIdentity.
	Metadata map[string]map[string]string
	Logger   *slog.Logger
	// Now names files (wall clock); tests replace it.
	Now func() time.Time
}

// Stats are the recorder's counters since New.
type Stats struct {
	FramesSubmitted uint64 // Frame calls
	FramesDropped   uint64 // queue full (or recorder closed): never recorded
	FramesWritten   uint64 // frames whose image reached a file
	MessagesDropped uint64 // JSON messages and episode notices lost to a full queue
	WriteErrors     uint64 // failed writes, creates, closes or deletes
	FilesClosed     uint64 // recordings completed (with their summary)
	FilesDeleted    uint64 // removed to stay within budget_bytes
	BytesWritten    uint64 // bytes of completed and current files
	Clips           uint64 // event mode: clips opened
	QueueLength     int    // frames waiting now
	// WorkerCPU is the CPU time (user + system) of the recorder's
	// goroutine, which runs locked to its own OS thread: encoding,
	// compression and writes. Zero where the thread clock is unavailable.
	WorkerCPU time.Duration
}

// Recorder writes MCAP recordings on its own goroutine. Frame, JSON and
// the episode notices never block: what does not fit the bounded queues
// is dropped and counted.
type Recorder struct {
	cfg  Config
	opts Options
	log  *slog.Logger

	frames chan *slot
	free   chan *slot
	ctrl   chan ctrlItem
	stop   chan struct{}
	done   chan struct{}
	closed atomic.Bool
	once   sync.Once

	submitted, dropped, written, msgDropped, writeErrs atomic.Uint64
	filesClosed, filesDeleted, bytesWritten, clips     atomic.Uint64
	current                                            atomic.Int64 // bytes of the open file
	workerCPU                                          atomic.Int64 // ns of the worker thread's CPU time

	// worker state
	w worker
}

// slot is a frame copy circulating between the caller and the worker.
type slot struct {
	camera          string
	seq             uint64
	capture         time.Time
	width, height   int
	rgb             []uint8
	mapW, mapH      int
	depth, scale, e []float32
}

type ctrlKind int

const (
	ctrlJSON ctrlKind = iota
	ctrlOpened
	ctrlUpdated
	ctrlEnded
	ctrlCamera
	ctrlMetadata
)

type ctrlItem struct {
	kind    ctrlKind
	camera  string
	stream  int
	id      string
	t       time.Time
	payload []byte
	intr    Intrinsics
	meta    map[string]string
}

// New validates cfg (after WithDefaults) and starts the recorder's
// goroutine; Close stops it.
func New(cfg Config, opts Options) (*Recorder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate("record"); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, errors.New("record: mode is off")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	seen := map[string]bool{}
	for i, s := range opts.Streams {
		if err := mcaprec.CheckStream(s.Name); err != nil {
			return nil, fmt.Errorf("record: stream %d: %w", i, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("record: stream %q declared twice", s.Name)
		}
		seen[s.Name] = true
		if s.SchemaName == "" || len(s.Schema) == 0 {
			return nil, fmt.Errorf("record: stream %q needs a schema name and a JSON Schema", s.Name)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("record.dir: %w", err)
	}
	comp, err := newCompressor(cfg.Compression)
	if err != nil {
		return nil, fmt.Errorf("record.compression: %w", err)
	}
	r := &Recorder{cfg: cfg, opts: opts, log: opts.Logger,
		frames: make(chan *slot, cfg.Queue), free: make(chan *slot, cfg.Queue),
		ctrl: make(chan ctrlItem, 256), stop: make(chan struct{}), done: make(chan struct{})}
	for range cfg.Queue {
		r.free <- &slot{}
	}
	if err := r.w.init(r, comp); err != nil {
		return nil, err
	}
	go r.run()
	return r, nil
}

// Frame hands one frame to the recorder: it copies the frame into a free
// slot and queues it, or drops it (false) when every slot is taken. It
// never blocks and, once warm, allocates nothing.
func (r *Recorder) Frame(f *Frame) bool {
	r.submitted.Add(1)
	if r.closed.Load() {
		r.dropped.Add(1)
		return false
	}
	var s *slot
	select {
	case s = <-r.free:
	default:
		r.dropped.Add(1)
		return false
	}
	s.camera, s.seq, s.capture, s.width, s.height = f.Camera, f.Seq, f.Capture, f.Width, f.Height
	s.rgb = append(s.rgb[:0], f.RGB...)
	s.mapW, s.mapH = f.MapWidth, f.MapHeight
	s.depth = copyMap(s.depth, f.Depth, r.cfg.records(MapDepth))
	s.scale = copyMap(s.scale, f.Scale, r.cfg.records(MapScale))
	s.e = copyMap(s.e, f.Epistemic, r.cfg.records(MapEpistemic))
	r.frames <- s // cannot block: there are as many slots as queue places
	return true
}

// copyMap copies src into dst when the map is recorded; nil means absent.
func copyMap(dst, src []float32, recorded bool) []float32 {
	if !recorded || src == nil {
		return dst[:0]
	}
	return append(dst[:0], src...)
}

func (r *Recorder) control(c ctrlItem) bool {
	if r.closed.Load() {
		r.msgDropped.Add(1)
		return false
	}
	select {
	case r.ctrl <- c:
		return true
	default:
		r.msgDropped.Add(1)
		return false
	}
}

// JSON records payload (one JSON document, e.g. a marshalled alert event)
// on /<camera>/<stream> at time t. stream must be one of Options.Streams.
// The payload is copied.
func (r *Recorder) JSON(camera, stream string, t time.Time, payload []byte) bool {
	idx := -1
	for i, s := range r.opts.Streams {
		if s.Name == stream {
			idx = i
		}
	}
	if idx < 0 || mcaprec.CheckCamera(camera) != nil {
		r.log.Warn("record: JSON message on an undeclared stream or a bad camera id dropped", "camera", camera, "stream", stream)
		r.msgDropped.Add(1)
		return false
	}
	return r.control(ctrlItem{kind: ctrlJSON, camera: camera, stream: idx, t: t, payload: bytes.Clone(payload)})
}

// EpisodeOpened starts (event mode) or extends a clip: the clip holds the
// pre-roll before t and lasts until post_roll after the last open episode
// ended. In continuous mode episodes are only listed in the file's
// metadata.
func (r *Recorder) EpisodeOpened(id string, t time.Time) bool {
	return r.control(ctrlItem{kind: ctrlOpened, id: id, t: t})
}

// EpisodeUpdated keeps episode id open (it opens it when the recorder
// missed the opening, e.g. after a restart).
func (r *Recorder) EpisodeUpdated(id string, t time.Time) bool {
	return r.control(ctrlItem{kind: ctrlUpdated, id: id, t: t})
}

// EpisodeEnded ends episode id at t.
func (r *Recorder) EpisodeEnded(id string, t time.Time) bool {
	return r.control(ctrlItem{kind: ctrlEnded, id: id, t: t})
}

// SetCamera sets the intrinsics of a camera's frames; every file gets a
// foxglove.CameraCalibration message before the camera's first frame, and
// a new one after a change.
func (r *Recorder) SetCamera(camera string, in Intrinsics) error {
	if err := mcaprec.CheckCamera(camera); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if !(in.Fx > 0 && in.Fy > 0) || in.Width <= 0 || in.Height <= 0 {
		return fmt.Errorf("record: camera %s: intrinsics %+v need fx, fy > 0 and a size", camera, in)
	}
	if !r.control(ctrlItem{kind: ctrlCamera, camera: camera, intr: in}) {
		return fmt.Errorf("record: camera %s: queue full", camera)
	}
	return nil
}

// SetMetadata replaces the metadata record name (one of Options.Metadata
// or a new one) from now on: files created later start with it, and the
// open file gets it as a further record at this point (e.g. the
// calibration's sha256 after a SIGHUP reload; readers take the last).
func (r *Recorder) SetMetadata(name string, m map[string]string) bool {
	cp := make(map[string]string, len(m))
	for k, v := range m {
		cp[k] = v
	}
	return r.control(ctrlItem{kind: ctrlMetadata, id: name, meta: cp})
}

// Stats returns the counters.
func (r *Recorder) Stats() Stats {
	return Stats{
		FramesSubmitted: r.submitted.Load(), FramesDropped: r.dropped.Load(), FramesWritten: r.written.Load(),
		MessagesDropped: r.msgDropped.Load(), WriteErrors: r.writeErrs.Load(), FilesClosed: r.filesClosed.Load(),
		FilesDeleted: r.filesDeleted.Load(), BytesWritten: r.bytesWritten.Load() + uint64(r.current.Load()), Clips: r.clips.Load(),
		QueueLength: len(r.frames), WorkerCPU: time.Duration(r.workerCPU.Load()),
	}
}

// Close records what is queued, completes the open file (last chunk,
// summary) and stops the goroutine. If ctx ends first, Close returns its
// error and the goroutine finishes in the background.
func (r *Recorder) Close(ctx context.Context) error {
	r.once.Do(func() {
		r.closed.Store(true)
		close(r.stop)
	})
	select {
	case <-r.done:
		return r.w.closeErr
	case <-ctx.Done():
		return fmt.Errorf("record: close: %w", ctx.Err())
	}
}

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
	image, depth, scale, epistemic, calib int // channel spec indexes
	json                                  []int
	intr                                  *Intrinsics
	calibVersion                          int
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
	c := &camState{}
	raw := func(stream, unit, meaning string) int {
		return w.addSpec(channelSpec{topic: mcaprec.Topic(id, stream), schemaName: mcaprec.RawImageSchema,
			schemaEncoding: mcaprec.ProtobufEncoding, schemaData: w.rawSchema, messageEnc: mcaprec.ProtobufEncoding,
			metadata: map[string]string{"camera": id, "unit": unit, "meaning": meaning}})
	}
	c.image = w.addSpec(channelSpec{topic: mcaprec.Topic(id, mcaprec.ImageStream), schemaName: mcaprec.CompressedImageSchema,
		schemaEncoding: mcaprec.ProtobufEncoding, schemaData: w.imgSchema, messageEnc: mcaprec.ProtobufEncoding,
		metadata: map[string]string{"camera": id}})
	c.depth = raw(mcaprec.DepthStream, "m", "predicted depth")
	c.scale = raw(mcaprec.ScaleStream, "m", "Laplace scale b of the depth error (aleatoric)")
	c.epistemic = raw(mcaprec.EpistemicStream, "1", "DIDO epistemic uncertainty K/S")
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

func (w *worker) fail(err error) {
	w.r.writeErrs.Add(1)
	w.r.log.Error("recording", "err", err)
	if w.file != nil {
		w.file.abort()
		w.r.bytesWritten.Add(uint64(w.file.size()))
		w.r.current.Store(0)
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
	for _, m := range [...]struct {
		spec int
		px   []float32
	}{{cam.depth, s.depth}, {cam.scale, s.scale}, {cam.epistemic, s.e}} {
		if len(m.px) == 0 {
			continue
		}
		if len(m.px) != s.mapW*s.mapH {
			w.r.log.Warn("record: map skipped", "topic", w.specs[m.spec].topic, "err",
				fmt.Sprintf("%d values for %dx%d", len(m.px), s.mapW, s.mapH))
			continue
		}
		w.msg = mcaprec.AppendRawImage32F(w.msg[:0], s.capture, s.camera, s.mapW, s.mapH, m.px, w.cfg.MapMantissaBits)
		w.emit(m.spec, seq, t, w.msg)
	}
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
	f, err := createFile(path, w.cfg.ChunkBytes, w.comp, w.metadata(now, t))
	if err != nil {
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
		"maps": strings.Join(c.Maps, ","), "map_mantissa_bits": strconv.Itoa(c.MapMantissaBits), "compression": c.Compression, "chunk_bytes": strconv.FormatInt(c.ChunkBytes, 10),
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
