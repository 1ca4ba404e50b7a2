package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/pkg/mapgrid"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
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
	// Maps are row-major MapWidth x MapHeight at the frame's size; nil
	// ones are not recorded.
	MapWidth, MapHeight int
	Depth               []float32 // metres (relative inverse depth when Relative)
	Scale               []float32 // Laplace scale b, metres (b/depth when Relative)
	Epistemic           []float32 // DIDO K/S
	// Relative: the maps are a relative model's (no metres).
	Relative bool
	// Computed are the same maps on the grids the models computed them
	// on: what map_resolution computed (the default) records. Without
	// them the frame-size maps are recorded.
	Computed ComputedMaps
}

// ComputedMaps are a frame's maps at the resolution they were computed
// at: the depth on the depth model's output grid, the Laplace scale and
// K/S on the AuxUE's, both covering the model input that Grid places the
// frame in. mapgrid.NewRemap(Grid, w, h) resamples them to the frame.
type ComputedMaps struct {
	Grid                    mapgrid.Geometry
	DepthWidth, DepthHeight int
	Depth                   []float32
	AuxWidth, AuxHeight     int
	Scale, Epistemic        []float32
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
	// Vehicle names the vehicle in the object keys and metadata of
	// uploads (record.upload; the alerts' vehicle id).
	Vehicle string
	// UploadClient reaches the object storage of record.upload; nil makes
	// one from the environment and ~/.aws (internal/objstore).
	UploadClient *objstore.Client
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
	// WideMaps counts maps written in float32 under map_precision float16
	// because a value lay beyond binary16's range.
	WideMaps    uint64
	QueueLength int // frames waiting now
	// WorkerCPU is the CPU time (user + system) of the recorder's
	// goroutine, which runs locked to its own OS thread: encoding,
	// compression and writes. Zero where the thread clock is unavailable.
	WorkerCPU time.Duration
	// With record.upload: finished files moved into the upload queue,
	// finished files waiting in dir for room in the queue, and finished
	// files deleted by budget_bytes before they could be queued (also in
	// FilesDeleted).
	UploadQueued, UploadDiscarded uint64
	UploadWaiting                 int64
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
	wideMaps                                           atomic.Uint64
	current                                            atomic.Int64 // bytes of the open file
	workerCPU                                          atomic.Int64 // ns of the worker thread's CPU time

	// worker state
	w worker
	// ho hands finished files to the upload queue (nil without
	// record.upload).
	ho *handover
}

// slot is a frame copy circulating between the caller and the worker.
type slot struct {
	camera          string
	seq             uint64
	capture         time.Time
	width, height   int
	rgb             []uint8
	relative        bool
	grid            mapgrid.Geometry // the computed maps' grid; zero: frame-size maps
	depthW, depthH  int
	auxW, auxH      int
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
	if cfg.Upload != nil {
		q, err := openUploads(cfg, opts)
		if err != nil {
			return nil, err
		}
		r.ho = newHandover(r, q, opts.Vehicle)
		go r.ho.run()
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
	s.relative = f.Relative
	c := &f.Computed
	if r.cfg.MapResolution == MapsComputed && (c.Depth != nil || c.Scale != nil || c.Epistemic != nil) {
		s.grid = c.Grid
		s.depthW, s.depthH, s.auxW, s.auxH = c.DepthWidth, c.DepthHeight, c.AuxWidth, c.AuxHeight
		s.depth = copyMap(s.depth, c.Depth, r.cfg.records(MapDepth))
		s.scale = copyMap(s.scale, c.Scale, r.cfg.records(MapScale))
		s.e = copyMap(s.e, c.Epistemic, r.cfg.records(MapEpistemic))
	} else {
		s.grid = mapgrid.Geometry{}
		s.depthW, s.depthH, s.auxW, s.auxH = f.MapWidth, f.MapHeight, f.MapWidth, f.MapHeight
		s.depth = copyMap(s.depth, f.Depth, r.cfg.records(MapDepth))
		s.scale = copyMap(s.scale, f.Scale, r.cfg.records(MapScale))
		s.e = copyMap(s.e, f.Epistemic, r.cfg.records(MapEpistemic))
	}
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
	s := Stats{
		FramesSubmitted: r.submitted.Load(), FramesDropped: r.dropped.Load(), FramesWritten: r.written.Load(),
		MessagesDropped: r.msgDropped.Load(), WriteErrors: r.writeErrs.Load(), FilesClosed: r.filesClosed.Load(),
		FilesDeleted: r.filesDeleted.Load(), BytesWritten: r.bytesWritten.Load() + uint64(r.current.Load()), Clips: r.clips.Load(),
		WideMaps: r.wideMaps.Load(), QueueLength: len(r.frames), WorkerCPU: time.Duration(r.workerCPU.Load()),
	}
	if h := r.ho; h != nil {
		s.UploadQueued, s.UploadDiscarded, s.UploadWaiting = h.queued.Load(), h.discarded.Load(), h.waiting.Load()
	}
	return s
}

// Close records what is queued, completes the open file (last chunk,
// summary), hands it to the upload queue (record.upload: moved in, not
// uploaded: that is Uploads' Run) and stops the goroutines. If ctx ends
// first, Close returns its error and the goroutines finish in the
// background.
func (r *Recorder) Close(ctx context.Context) error {
	r.once.Do(func() {
		r.closed.Store(true)
		close(r.stop)
	})
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("record: close: %w", ctx.Err())
	}
	if r.ho != nil {
		select {
		case <-r.ho.done:
		case <-ctx.Done():
			return fmt.Errorf("record: close: handing the last file to the upload queue: %w", ctx.Err())
		}
	}
	return r.w.closeErr
}
