package simrig

import (
	"fmt"
	"sync"
	"time"

	"github.com/didoedge/didoedge/camera/sim"
)

// Corruptor applies an image corruption (dataset/corrupt's Corruptor
// does): the simulated rig takes it from its caller, so that the camera
// side imports no data-set code.
type Corruptor interface {
	// Validate reports whether name at severity is a corruption.
	Validate(name string, severity int) error
	// Apply writes src corrupted into dst (w x h RGB), seeded.
	Apply(dst, src []uint8, w, h int, name string, severity int, seed uint64) error
}

// Phase is one part of a scripted scenario: a world, a fog density,
// obstacles, an image corruption and a camera, for a duration.
type Phase struct {
	Name     string
	World    string  // sim.WorldOutdoor or sim.WorldIndoor
	Fog      float32 // extinction coefficient in 1/m, 0 = clear
	Duration time.Duration
	// Obstacles puts crates and fallen trees on the ego lane (outdoor).
	Obstacles bool
	// Corruption (a dataset/corrupt name, e.g. gaussian_noise, dark) at
	// Severity 1..5 is applied to every rendered frame by the scenario's
	// Corruptor; "" for none.
	Corruption string
	Severity   int
	// Camera is the simulated camera (sim.Config.Camera): "" is the
	// training camera, sim.CameraNewCam the same roads through another
	// lens, colour response and sensor at the scenario's frame size.
	Camera string
}

// DefaultScenario shows in-distribution driving, then heavy fog, driving
// again, then the indoor world (a data-set change), and loops.
func DefaultScenario() []Phase {
	return []Phase{
		{Name: "outdoor", World: sim.WorldOutdoor, Duration: 12 * time.Second},
		{Name: "heavy fog", World: sim.WorldOutdoor, Fog: 0.12, Duration: 10 * time.Second},
		{Name: "outdoor", World: sim.WorldOutdoor, Duration: 12 * time.Second},
		{Name: "indoor", World: sim.WorldIndoor, Duration: 10 * time.Second},
	}
}

// Scenario is an rtspserver.FrameSource that plays phases in a loop at a
// fixed frame rate: frame i belongs to the phase covering i/fps. Each
// distinct (world, fog) has its own renderer; frame i of every phase is the
// renderer's frame i, so the drive continues where it would be.
type Scenario struct {
	phases    []Phase
	fps       float64
	w, h      int
	renderers []*sim.Renderer // per phase (shared between equal phases)
	frame     *sim.Frame
	period    time.Duration
	corrupt   Corruptor

	cache [][][]uint8 // per phase, frames 0..n-1 (see Precompute)

	mu       sync.Mutex
	current  int // index of the phase of the last rendered frame
	switches []Switch
}

// Switch records when the camera started rendering a phase.
type Switch struct {
	Phase int
	At    time.Time // wall time the first frame of the phase was asked for (its capture instant)
	Frame int
}

// NewScenario builds the renderers for the phases (a forward camera); c
// corrupts the phases that name a corruption (nil when none does).
func NewScenario(phases []Phase, fps float64, width, height int, seed int64, c Corruptor) (*Scenario, error) {
	return NewScenarioView(phases, fps, width, height, seed, 0, c)
}

// NewScenarioView is NewScenario for a camera turned by heading degrees
// (sim.Config.Heading): a side camera of a multi-camera rig.
func NewScenarioView(phases []Phase, fps float64, width, height int, seed int64, heading float64, c Corruptor) (*Scenario, error) {
	if len(phases) == 0 {
		return nil, fmt.Errorf("scenario: no phases")
	}
	if !(fps > 0) {
		return nil, fmt.Errorf("scenario: fps %g must be positive", fps)
	}
	s := &Scenario{phases: phases, fps: fps, w: width, h: height, frame: sim.NewFrame(width, height), current: -1,
		corrupt: c}
	byKey := map[string]*sim.Renderer{}
	for i, p := range phases {
		if p.Duration <= 0 {
			return nil, fmt.Errorf("scenario: phase %d (%s): duration %v must be positive", i, p.Name, p.Duration)
		}
		if p.Corruption != "" {
			if c == nil {
				return nil, fmt.Errorf("scenario: phase %d (%s): corruption %s but no corruptor", i, p.Name, p.Corruption)
			}
			if err := c.Validate(p.Corruption, p.Severity); err != nil {
				return nil, fmt.Errorf("scenario: phase %d (%s): %w", i, p.Name, err)
			}
		}
		s.period += p.Duration
		key := fmt.Sprintf("%s/%g/%v/%s", p.World, p.Fog, p.Obstacles, p.Camera)
		r, ok := byKey[key]
		if !ok {
			var err error
			if r, err = sim.NewRenderer(sim.Config{World: p.World, Width: width, Height: height, Seed: seed, Fog: p.Fog, Obstacles: p.Obstacles, Heading: heading, Camera: p.Camera}); err != nil {
				return nil, fmt.Errorf("scenario: phase %d (%s): %w", i, p.Name, err)
			}
			byKey[key] = r
		}
		s.renderers = append(s.renderers, r)
	}
	return s, nil
}

// PhaseAt returns the phase index of frame index.
func (s *Scenario) PhaseAt(index int) int {
	t := time.Duration(float64(index) / s.fps * float64(time.Second))
	t %= s.period
	for i, p := range s.phases {
		if t < p.Duration {
			return i
		}
		t -= p.Duration
	}
	return len(s.phases) - 1
}

// Phases returns the phases.
func (s *Scenario) Phases() []Phase { return s.phases }

// Current returns the phase of the most recently rendered frame (-1 before
// the first).
func (s *Scenario) Current() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Switches returns the phase changes so far, oldest first.
func (s *Scenario) Switches() []Switch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Switch(nil), s.switches...)
}

// Size implements rtspserver.FrameSource.
func (s *Scenario) Size() (int, int) { return s.w, s.h }

// Precompute renders frames 0..n-1 of every phase once; Render then
// serves frame index%n from memory. Benchmarks use it so that the
// simulator's rendering does not compete with the pipeline for the CPU.
func (s *Scenario) Precompute(n int) error {
	s.cache = make([][][]uint8, len(s.phases))
	for ph := range s.phases {
		for i := range n {
			if err := s.renderPhase(ph, i); err != nil {
				return err
			}
			s.cache[ph] = append(s.cache[ph], append([]uint8(nil), s.frame.RGB...))
		}
	}
	return nil
}

// renderPhase renders frame index of phase ph into s.frame, corrupted as
// the phase says (the noise seed is the frame index: it changes per frame).
func (s *Scenario) renderPhase(ph, index int) error {
	if err := s.renderers[ph].Render(index, s.frame); err != nil {
		return err
	}
	if p := s.phases[ph]; p.Corruption != "" {
		return s.corrupt.Apply(s.frame.RGB, s.frame.RGB, s.w, s.h, p.Corruption, p.Severity, uint64(index))
	}
	return nil
}

// Render implements rtspserver.FrameSource: frame index of its phase. A
// phase's Switch time is taken when Render is called, which is the
// frame's capture instant for the RTSP server (it stamps the frame just
// before rendering it), not after the rendering work.
func (s *Scenario) Render(index int, rgb []uint8) error {
	at := time.Now()
	ph := s.PhaseAt(index)
	if s.cache != nil {
		c := s.cache[ph]
		copy(rgb, c[index%len(c)])
	} else {
		if err := s.renderPhase(ph, index); err != nil {
			return err
		}
		copy(rgb, s.frame.RGB)
	}
	s.mu.Lock()
	if ph != s.current {
		s.switches = append(s.switches, Switch{Phase: ph, At: at, Frame: index})
	}
	s.current = ph
	s.mu.Unlock()
	return nil
}
