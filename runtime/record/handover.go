package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/record/mcapsource"
	"github.com/didoedge/didoedge/runtime/record/upload"
)

// handoverRetry is how often finished files that the full queue refused
// are offered again (and leftovers looked for).
const handoverRetry = 5 * time.Second

// Object metadata of an uploaded recording (the content's own checksum is
// S3's x-amz-checksum-crc64nvme, which the queue sends). S3 sends user metadata as HTTP headers
// (x-amz-meta-<name>), so the names are lower-case words and hyphens.
const (
	MetaVehicle     = "vehicle"
	MetaCamera      = "camera"  // the key's camera level: the camera, or MultiCamera
	MetaCameras     = "cameras" // the run's cameras, comma separated
	MetaDepth       = "depth-sha256"
	MetaAuxUE       = "auxue-sha256"
	MetaCalibration = "calibration-sha256" // one camera: its sha256 or "none"; several: camera:sha256,...
	// MultiCamera is the camera level of a recording of several cameras;
	// UnknownCamera that of a leftover file whose metadata is unreadable.
	MultiCamera   = "multi"
	UnknownCamera = "unknown"
)

// handover moves finished recordings into the upload queue, on its own
// goroutine: Enqueue reads the whole file (its CRC-64/NVME checksums),
// which must not stall the recorder's worker. It owns every finished file of
// dir: the worker tells it which file is open (never offered) and which
// one it finished; files left by an earlier process are offered too. A
// file the full queue refuses stays in dir and is offered again every
// handoverRetry, oldest first; until then the recorder's budget may
// delete it (counted as discarded), but never the one being enqueued.
type handover struct {
	r       *Recorder
	q       *upload.Queue
	vehicle string
	log     *slog.Logger
	poke    chan struct{}
	done    chan struct{}

	mu       sync.Mutex
	open     string                       // the file the worker writes ("" none)
	busy     string                       // the file being enqueued ("" none)
	known    map[string]map[string]string // finished by this process: path -> object metadata
	reported map[string]bool              // refused once (logged and counted)

	queued, discarded atomic.Uint64
	waiting           atomic.Int64
}

func newHandover(r *Recorder, q *upload.Queue, vehicle string) *handover {
	return &handover{r: r, q: q, vehicle: vehicle, log: r.log, poke: make(chan struct{}, 1), done: make(chan struct{}),
		known: map[string]map[string]string{}, reported: map[string]bool{}}
}

// openUploads opens the upload queue of cfg.Upload after checking that
// moving a file from dir into it is a rename (the same filesystem).
func openUploads(cfg Config, opts Options) (*upload.Queue, error) {
	u := *cfg.Upload
	if err := checkKeyLevel(opts.Vehicle); err != nil {
		return nil, fmt.Errorf("record.upload: the vehicle (alerts.vehicle) %w", err)
	}
	if err := os.MkdirAll(u.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("record.upload.dir: %w", err)
	}
	probe, err := os.CreateTemp(cfg.Dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("record.dir: %w", err)
	}
	probe.Close()
	moved := filepath.Join(u.Dir, ".tmp-probe")
	err = os.Rename(probe.Name(), moved)
	os.Remove(probe.Name())
	os.Remove(moved)
	if err != nil {
		return nil, fmt.Errorf("record.upload.dir: %s must be on the filesystem of record.dir %s (queued files are moved, not copied): %w", u.Dir, cfg.Dir, err)
	}
	client := opts.UploadClient
	if client == nil {
		home, _ := os.UserHomeDir()
		oc, err := objstore.ConfigFromEnv(os.Getenv, home)
		if err != nil {
			return nil, fmt.Errorf("record.upload: object storage: %w", err)
		}
		if client, err = objstore.New(oc, opts.Logger); err != nil {
			return nil, fmt.Errorf("record.upload: %w", err)
		}
	}
	q, err := upload.Open(u, client, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("record.upload: %w", err)
	}
	return q, nil
}

// checkKeyLevel accepts a name that can be one level of an object key.
func checkKeyLevel(v string) error {
	if v == "" || v == "." || v == ".." || strings.ContainsAny(v, "/\\") {
		return fmt.Errorf("%q is not a plain name (it is a level of the object keys)", v)
	}
	return nil
}

// setOpen names the file the worker is about to create ("" after it is
// closed): a file is named before it exists, so that a listing never
// offers it.
func (h *handover) setOpen(path string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.open = path
	h.mu.Unlock()
}

// finished hands over a file the worker completed (or abandoned after a
// write error), with the didoedge.models metadata it was last recorded
// under.
func (h *handover) finished(path string, models map[string]string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.open == path {
		h.open = ""
	}
	h.known[path] = uploadMeta(h.vehicle, models)
	h.mu.Unlock()
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// remove deletes a finished file for the recorder's budget unless it is
// being enqueued (false, nil then).
func (h *handover) remove(path string) (bool, error) {
	if h == nil {
		return true, os.Remove(path)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.busy == path {
		return false, nil
	}
	if err := os.Remove(path); errors.Is(err, os.ErrNotExist) {
		return false, nil // moved into the queue since the listing
	} else if err != nil {
		return false, err
	}
	delete(h.known, path)
	delete(h.reported, path)
	h.discarded.Add(1)
	h.log.Warn("recording deleted before its upload (record.budget_bytes; the upload queue was full)", "file", path)
	return true, nil
}

// run offers the finished files at start (leftovers of an earlier
// process), whenever the worker finishes one or an upload frees room in
// the queue, and every handoverRetry;
// once the worker has stopped it offers the last file and returns.
func (h *handover) run() {
	defer close(h.done)
	tick := time.NewTicker(handoverRetry)
	defer tick.Stop()
	for {
		h.flush()
		select {
		case <-h.poke:
		case <-h.q.Freed():
		case <-tick.C:
		case <-h.r.done:
			h.flush()
			return
		}
	}
}

// flush offers the finished files of dir to the queue, oldest first,
// until the queue refuses one.
func (h *handover) flush() {
	recs, err := listRecordings(h.r.cfg.Dir)
	if err != nil {
		h.r.writeErrs.Add(1)
		h.log.Error("recording: list for upload", "dir", h.r.cfg.Dir, "err", err)
		return
	}
	h.mu.Lock()
	open := h.open
	h.mu.Unlock()
	var waiting int64
	stopped := false
	for _, rec := range recs {
		if rec.path == open {
			continue
		}
		if stopped || !h.offer(rec) {
			stopped = true
			waiting++
		}
	}
	h.waiting.Store(waiting)
}

// offer enqueues one finished file; false when it stays (the queue is
// full, or an error that was logged).
func (h *handover) offer(rec recording) bool {
	h.mu.Lock()
	meta, known := h.known[rec.path]
	reported := h.reported[rec.path]
	if reported && !h.q.Fits(rec.size) {
		h.mu.Unlock()
		return false // still no room: not a new refusal
	}
	h.busy = rec.path
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.busy = ""
		h.mu.Unlock()
	}()
	if !known {
		meta = h.leftoverMeta(rec.path)
	}
	err := h.q.Enqueue(rec.path, meta)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		delete(h.known, rec.path)
		delete(h.reported, rec.path)
		h.queued.Add(1)
		h.log.Info("recording queued for upload", "file", rec.path, "bytes", rec.size, "camera", meta[MetaCamera])
		return true
	case errors.Is(err, upload.ErrBudget):
		if !reported {
			h.reported[rec.path] = true
			h.log.Warn("upload queue full (record.upload.max_bytes): the recording waits in record.dir", "file", rec.path, "err", err)
		}
		return false
	case errors.Is(err, os.ErrNotExist):
		delete(h.known, rec.path) // deleted meanwhile (by the budget: counted there)
		return true
	default:
		h.r.writeErrs.Add(1)
		h.log.Error("recording not queued for upload (offered again later)", "file", rec.path, "err", err)
		return false
	}
}

// leftoverMeta is the object metadata of a file an earlier process left
// (finished or cut by a crash): the didoedge.models record it was created
// with, read from its start.
func (h *handover) leftoverMeta(path string) map[string]string {
	models, err := readModels(path)
	if err != nil {
		h.log.Warn("recording: its models are unknown; uploaded without them", "file", path, "err", err)
	}
	return uploadMeta(h.vehicle, models)
}

// readModels reads a recording up to its first message and returns the
// last didoedge.models metadata record seen by then (nil if none).
func readModels(path string) (map[string]string, error) {
	r, err := mcapsource.OpenReader(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var m mcapsource.Message
	if err := r.Next(&m); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var models map[string]string
	for _, md := range r.Metadata() {
		if md.Name == mcaprec.ModelsMetadata {
			models = md.Metadata
		}
	}
	return models, nil
}

// uploadMeta is the object metadata of a recording from its
// didoedge.models record (RunIdentity): the vehicle, the camera level of
// its key and its cameras, the sha256 of the depth model, the AuxUE and
// the cameras' calibrations.
func uploadMeta(vehicle string, models map[string]string) map[string]string {
	meta := map[string]string{MetaVehicle: vehicle, MetaCamera: UnknownCamera}
	var cams []string
	for _, c := range strings.Split(models[IdentityCameras], ",") {
		if c != "" {
			cams = append(cams, c)
		}
	}
	switch len(cams) {
	case 0:
	case 1:
		meta[MetaCamera] = cams[0]
	default:
		meta[MetaCamera] = MultiCamera
	}
	if len(cams) > 0 {
		meta[MetaCameras] = strings.Join(cams, ",")
		cals := make([]string, len(cams))
		for i, c := range cams {
			_, sha := CalibrationOf(models, c)
			if sha == "" {
				sha = "none" // built-in defaults
			}
			cals[i] = c + ":" + sha
		}
		sort.Strings(cals)
		if len(cams) == 1 {
			meta[MetaCalibration] = strings.TrimPrefix(cals[0], cams[0]+":")
		} else {
			meta[MetaCalibration] = strings.Join(cals, ",")
		}
	}
	if v := models["calibration_sha256"]; len(cams) == 0 && v != "" {
		meta[MetaCalibration] = v // ModelIdentity's file-wide calibration
	}
	for name, key := range map[string]string{"depth": MetaDepth, "auxue": MetaAuxUE} {
		if v := models[name+"_sha256"]; v != "" {
			meta[key] = v
		}
	}
	return meta
}

// Uploads is the recorder's upload queue (nil without record.upload): its
// owner runs it (Queue.Run) and exports its metrics (upload.Collectors).
func (r *Recorder) Uploads() *upload.Queue {
	if r.ho == nil {
		return nil
	}
	return r.ho.q
}

// RunUploads runs the upload queue until ctx ends (nil at once without
// record.upload); what is in flight then resumes at the next start.
func (r *Recorder) RunUploads(ctx context.Context) error {
	q := r.Uploads()
	if q == nil {
		return nil
	}
	err := q.Run(ctx, false)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
