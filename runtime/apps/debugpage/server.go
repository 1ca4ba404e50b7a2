package debugpage

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"log/slog"
	"math"
	"net/http"
	"slices"

	"github.com/didoedge/didoedge/alerts/snapshot"
	"github.com/didoedge/didoedge/internal/colormap"
	"github.com/didoedge/didoedge/runtime/service"
	"github.com/didoedge/didoedge/runtime/stream"
)

//go:embed index.html
var indexHTML []byte

// Pipeline is what the page reads; *stream.Pipeline implements it.
type Pipeline interface {
	// Watch tells the pipeline a client wants snapshots.
	Watch()
	// Cameras lists the camera names in config order.
	Cameras() []string
	// ViewCamera calls fn with a camera's latest snapshot under a read
	// lock; false for an unknown camera.
	ViewCamera(name string, fn func(*stream.Snapshot)) bool
	// Events are the recent alert events of every camera, oldest first.
	Events() []stream.EventRecord
	Metrics() *stream.Metrics
	// Ready reports whether every camera's frames are being assessed.
	Ready() bool
	// CameraReady reports it per camera.
	CameraReady() map[string]bool
	// Health reports whether the pipeline works (/healthz).
	Health() stream.Health
	// EventSnapshot returns the JPEG snapshot of an event id; an error
	// wrapping snapshot.ErrNotFound when there is none.
	EventSnapshot(id string) ([]byte, error)
}

// Start listens on addr (host:port; port 0 picks a free one) and serves
// the page and the service endpoints of p until Close or ctx ends.
func Start(ctx context.Context, addr string, p Pipeline, log *slog.Logger, opts ...service.Option) (*service.Server, error) {
	s, err := service.Listen(ctx, addr, service.DefaultStartupGrace, log, opts...)
	if err != nil {
		return nil, err
	}
	s.Attach(p, Handler(p))
	return s, nil
}

// Handler returns the debug page's endpoints and the service endpoints
// (service.Handler: /metrics, /healthz, /readyz).
func Handler(p Pipeline) http.Handler {
	mux := http.NewServeMux()
	svc := service.Handler(p)
	for _, pattern := range []string{"GET /metrics", "GET /healthz", "GET /readyz"} {
		mux.Handle(pattern, svc)
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(indexHTML)
	})
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, r *http.Request) {
		p.Watch()
		st, ok := stateOf(p, r.URL.Query().Get("camera"))
		if !ok {
			http.Error(w, fmt.Sprintf("unknown camera %q", r.URL.Query().Get("camera")), http.StatusNotFound)
			return
		}
		writeJSON(w, st)
	})
	mux.HandleFunc("GET /img/{name}", func(w http.ResponseWriter, r *http.Request) {
		p.Watch()
		kind := r.PathValue("name")
		var buf bytes.Buffer
		var err error
		if !p.ViewCamera(cameraOf(p, r.URL.Query().Get("camera")), func(s *stream.Snapshot) { err = encodeImage(&buf, kind, s) }) {
			http.NotFound(w, r)
			return
		}
		if errors.Is(err, errUnknownImage) {
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "image/jpeg")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(buf.Bytes())
	})
	mux.HandleFunc("GET /api/events/{id}/snapshot.jpg", func(w http.ResponseWriter, r *http.Request) {
		b, err := p.EventSnapshot(r.PathValue("id"))
		if errors.Is(err, snapshot.ErrNotFound) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "image/jpeg")
		w.Header().Set("Cache-Control", "no-store") // a peak replaces an episode's snapshot
		w.Write(b)
	})
	return mux
}

// State is the JSON the page polls: the grid of cameras and the selected
// camera's frame, zones and events.
type State struct {
	// Camera is the selected camera; Cameras the grid, in config order.
	Camera    string               `json:"camera"`
	Cameras   []CameraTile         `json:"cameras"`
	Seq       uint64               `json:"seq"`
	CaptureMS int64                `json:"capture_ms"`
	FPS       float64              `json:"fps"`
	Ready     bool                 `json:"ready"`
	Frames    uint64               `json:"frames"`
	Dropped   uint64               `json:"dropped"`
	TauE      float64              `json:"tau_e"`
	Zones     []ZoneState          `json:"zones"`
	Events    []stream.EventRecord `json:"events"`
	// Domain is the selected camera's domain monitor (on false: none).
	Domain stream.DomainStatus `json:"domain"`
}

// ZoneState is one zone outline, its level and its fused signals.
type ZoneState struct {
	Name    string       `json:"name"`
	Polygon [][2]float64 `json:"polygon"`
	Level   string       `json:"level"`
	// FusedOOD and FusedAleatoric are the zone's fused OOD and aleatoric
	// fractions (what the level is decided on).
	FusedOOD       float32 `json:"fused_ood"`
	FusedAleatoric float32 `json:"fused_aleatoric"`
	Episode        string  `json:"episode,omitempty"`
	Closing        bool    `json:"closing,omitempty"`
}

// CameraTile is one camera of the grid: its rate, counters, readiness and
// its worst zone level.
type CameraTile struct {
	Name    string  `json:"name"`
	FPS     float64 `json:"fps"`
	Frames  uint64  `json:"frames"`
	Dropped uint64  `json:"dropped"`
	Ready   bool    `json:"ready"`
	Level   string  `json:"level"`
	// DomainShift: the camera's frames are unlike the models' training
	// domain (a domain_shift episode is open).
	DomainShift bool `json:"domain_shift"`
}

// cameraOf is the camera a request names, the first when it names none.
func cameraOf(p Pipeline, name string) string {
	if name == "" {
		if cams := p.Cameras(); len(cams) > 0 {
			return cams[0]
		}
	}
	return name
}

func stateOf(p Pipeline, camera string) (State, bool) {
	camera = cameraOf(p, camera)
	st := State{Camera: camera}
	ready := p.CameraReady()
	known := false
	for _, cm := range p.Metrics().Cameras() {
		tile := CameraTile{Name: cm.Camera, FPS: math.Round(cm.FPS()*10) / 10, Frames: cm.Frames.Load(), Dropped: cm.Dropped.Load(),
			Ready: ready[cm.Camera], Level: "ok", DomainShift: cm.Domain().Shifted}
		p.ViewCamera(cm.Camera, func(s *stream.Snapshot) {
			if len(s.Levels) > 0 {
				tile.Level = slices.Max(s.Levels).String()
			}
		})
		st.Cameras = append(st.Cameras, tile)
		if cm.Camera == camera {
			known = true
			st.FPS, st.Ready, st.Frames, st.Dropped = tile.FPS, tile.Ready, tile.Frames, tile.Dropped
			st.Domain = cm.Domain()
		}
	}
	if !known {
		return State{}, false
	}
	for _, e := range p.Events() {
		if e.Camera == camera {
			st.Events = append(st.Events, e)
		}
	}
	p.ViewCamera(camera, func(s *stream.Snapshot) {
		st.Seq = s.Seq
		st.TauE = s.TauE
		if !s.Capture.IsZero() {
			st.CaptureMS = s.Capture.UnixMilli()
		}
		for i, z := range s.Zones {
			zs := ZoneState{Name: z.Name, Polygon: z.Polygon, Level: s.Levels[i].String()}
			if i < len(s.Status) {
				zs.FusedOOD, zs.FusedAleatoric = s.Status[i].Fused.OODFraction, s.Status[i].Fused.AleatoricFraction
				zs.Episode, zs.Closing = s.Status[i].Episode, s.Status[i].Closing
			}
			st.Zones = append(st.Zones, zs)
		}
	})
	if st.Events == nil {
		st.Events = []stream.EventRecord{}
	}
	return st, true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

var errUnknownImage = errors.New("unknown image")

// encodeImage renders one view of the snapshot as JPEG: frame (the model
// input), depth (inverse depth, near is bright), aleatoric (b / depth,
// 0 to 0.5), epistemic (K/S from 0 to 2 tau_e, so that tau_e sits in the
// middle of the ramp and out-of-distribution pixels are yellow to red;
// 0 to 1 without a tau_e).
func encodeImage(buf *bytes.Buffer, kind string, s *stream.Snapshot) error {
	var img *image.RGBA
	switch kind {
	case "frame.jpg":
		img = image.NewRGBA(image.Rect(0, 0, s.ImageW, s.ImageH))
		for i, j := 0, 0; i+2 < len(s.RGB); i, j = i+3, j+4 {
			img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = s.RGB[i], s.RGB[i+1], s.RGB[i+2], 255
		}
	case "depth.jpg":
		img = heat(s.MapW, s.MapH, func(i int) float64 {
			d := float64(s.Depth[i])
			if !(d > 0) {
				return math.NaN()
			}
			return math.Min(1, 2/d) // 2 m and nearer is 1, 80 m is 0.025
		})
	case "aleatoric.jpg":
		img = heat(s.MapW, s.MapH, func(i int) float64 {
			d, b := float64(s.Depth[i]), float64(s.Scale[i])
			if !(d > 0) || !(b >= 0) {
				return math.NaN()
			}
			return b / d / 0.5
		})
	case "epistemic.jpg":
		top := 1.0
		if s.TauE > 0 && s.TauE <= 0.5 {
			top = 2 * s.TauE
		}
		img = heat(s.MapW, s.MapH, func(i int) float64 { return float64(s.Epistemic[i]) / top })
	default:
		return errUnknownImage
	}
	return jpeg.Encode(buf, img, &jpeg.Options{Quality: 80})
}

// heat maps values in [0,1] through a blue-green-yellow-red ramp; NaN is
// drawn black.
func heat(w, h int, value func(int) float64) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		v := value(i)
		var r, g, b uint8
		if !math.IsNaN(v) {
			r, g, b = colormap.Heat(math.Max(0, math.Min(1, v)))
		}
		img.Pix[4*i], img.Pix[4*i+1], img.Pix[4*i+2], img.Pix[4*i+3] = r, g, b, 255
	}
	return img
}
