package stream

import (
	"sync"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera"
)

// Snapshot is a copy of one assessed frame for the debug page: the model
// input image and the maps, with the zones and their levels. The pipeline
// fills it only while a client is watching, at most http.max_fps times a
// second, into buffers allocated once.
type Snapshot struct {
	mu sync.RWMutex

	Seq     uint64
	Capture time.Time
	// ImageW x ImageH RGB8 (the depth model's input after resizing).
	ImageW, ImageH int
	RGB            []uint8
	// MapW x MapH maps at the camera frame's size: depth (m), Laplace
	// scale b (m), epistemic K/S.
	MapW, MapH              int
	Depth, Scale, Epistemic []float32
	Zones                   []alerts.Zone
	Levels                  []alerts.Level
	// Status is each zone's level, fused signals and episode.
	Status []alerts.ZoneStatus
	// TauE is the calibration's global K/S threshold (the page centres
	// its epistemic colour scale on it).
	TauE float64
}

func (s *Snapshot) init(imgW, imgH, mapW, mapH int, zones []alerts.Zone, tauE float64) {
	s.ImageW, s.ImageH, s.MapW, s.MapH = imgW, imgH, mapW, mapH
	s.RGB = make([]uint8, 3*imgW*imgH)
	n := mapW * mapH
	s.Depth, s.Scale, s.Epistemic = make([]float32, n), make([]float32, n), make([]float32, n)
	s.setZones(zones, tauE)
}

func (s *Snapshot) setZones(zones []alerts.Zone, tauE float64) {
	s.mu.Lock()
	s.Zones, s.TauE = zones, tauE
	s.Levels = make([]alerts.Level, len(zones))
	s.Status = make([]alerts.ZoneStatus, len(zones))
	s.mu.Unlock()
}

// watchWindow is how long after a debug request the pipeline keeps copying.
const watchWindow = 2 * time.Second

// Watch tells the pipeline that a debug client wants data; without calls
// for watchWindow it stops copying maps. It covers every camera (the
// page's grid shows them all).
func (p *Pipeline) Watch() {
	now := time.Now().UnixNano()
	for _, c := range p.cameras().list {
		c.watchNS.Store(now)
	}
}

// View calls fn with the first camera's latest snapshot under a read
// lock; fn must not keep references to its slices.
func (p *Pipeline) View(fn func(*Snapshot)) { p.cameras().list[0].view(fn) }

// ViewCamera is View of the named camera; it reports false for an unknown
// camera.
func (p *Pipeline) ViewCamera(name string, fn func(*Snapshot)) bool {
	c, ok := p.cameras().byName[name]
	if ok {
		c.view(fn)
	}
	return ok
}

func (c *cameraPipe) view(fn func(*Snapshot)) {
	c.snap.mu.RLock()
	defer c.snap.mu.RUnlock()
	fn(&c.snap)
}

// maybeSnapshot copies the frame into the snapshot when a client watches
// and the rate allows. It never waits for a reader: if the page is
// encoding the previous snapshot, this frame is skipped.
func (c *cameraPipe) maybeSnapshot(now time.Time, f *camera.Frame, rgb []uint8, m alerts.Maps) {
	w := c.watchNS.Load()
	if w == 0 || now.Sub(time.Unix(0, w)) > watchWindow {
		return
	}
	if now.Sub(c.lastSnap) < time.Duration(float64(time.Second)/c.p.cfg.HTTP.MaxFPS) {
		return
	}
	s := &c.snap
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	c.lastSnap = now
	s.Seq, s.Capture = f.Seq, f.Capture
	copy(s.RGB, rgb)
	if s.MapW != m.Width || s.MapH != m.Height { // the camera's frame size changed
		n := m.Width * m.Height
		s.MapW, s.MapH = m.Width, m.Height
		s.Depth, s.Scale, s.Epistemic = make([]float32, n), make([]float32, n), make([]float32, n)
	}
	copy(s.Depth, m.Depth)
	copy(s.Scale, m.Scale)
	copy(s.Epistemic, m.Epistemic)
	if len(s.Status) == len(c.engine.Zones()) {
		for i := range s.Status {
			s.Status[i] = c.engine.ZoneStatus(i)
			s.Levels[i] = s.Status[i].Level
		}
	}
}
