package stream

import (
	"errors"
	"fmt"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// camSet is the cameras as other goroutines see them (health, metrics,
// the debug page): an immutable list in config order and its index by
// name, replaced as a whole when Apply adds or removes a camera.
type camSet struct {
	list   []*cameraPipe
	byName map[string]*cameraPipe
}

func (s *camSet) names() []string {
	out := make([]string, len(s.list))
	for i, c := range s.list {
		out[i] = c.name
	}
	return out
}

// cameras returns the cameras now (safe on any goroutine).
func (p *Pipeline) cameras() *camSet { return p.set.Load() }

// publishCameras makes p.cams (the scheduler's list) what the other
// goroutines see.
func (p *Pipeline) publishCameras() {
	s := &camSet{list: append([]*cameraPipe(nil), p.cams...), byName: make(map[string]*cameraPipe, len(p.cams))}
	for _, c := range p.cams {
		s.byName[c.name] = c
	}
	p.set.Store(s)
}

// CameraTap is implemented by a Tap that serves channels per camera (the
// live Foxglove server): Apply tells it the cameras after every change
// that adds or removes one, so that it advertises and unadvertises their
// channels.
type CameraTap interface {
	SetCameras(names []string)
}

// apply runs Apply on the scheduler goroutine: prepare every camera
// (reload, removal, or a new camera's source, models view and engine
// spec), then commit all (alerts.ApplyReloads), then the runtime's own
// copies and the cameras' goroutines.
func (p *Pipeline) apply(cfg *runconfig.Config, rs *runState) error {
	specs, err := cfg.CameraSpecs()
	if err != nil {
		return p.reloadFailed(err)
	}
	if err := checkDomainReload(p.Config().Domain, cfg.Domain); err != nil { // domain.go
		return p.reloadFailed(err)
	}
	byName := make(map[string]runconfig.CameraSpec, len(specs))
	for _, cs := range specs {
		byName[cs.Name] = cs
	}
	now := time.Now()
	var (
		prepared []*alerts.PreparedReload
		kept     []*cameraPipe
		next     []runconfig.CameraSpec // kept[i]'s new spec
		domains  []*domainReload        // kept[i]'s monitor settings
		removed  []*cameraPipe
		sources  []string
	)
	running := make(map[string]*cameraPipe, len(p.cams))
	for _, c := range p.cams {
		running[c.name] = c
		cs, ok := byName[c.name]
		if !ok {
			removed = append(removed, c)
			prepared = append(prepared, c.engine.PrepareRemove(now))
			continue
		}
		es, err := cs.EngineSpec()
		if err != nil {
			return p.reloadFailed(err)
		}
		r, err := c.engine.PrepareReload(es, now)
		if err != nil {
			return p.reloadFailed(fmt.Errorf("%s: %w", c.spec.Key, err))
		}
		prepared = append(prepared, r)
		dr, err := c.prepareDomainReload(cfg.Domain, es.Calibration) // domain.go
		if err != nil {
			return p.reloadFailed(fmt.Errorf("%s: %w", c.spec.Key, err))
		}
		domains = append(domains, dr)
		if cs.Source != c.spec.Source {
			sources = append(sources, cs.Key)
		}
		// The source stays the running one; Key follows the new file.
		n := c.spec
		n.Alerts, n.Key, n.ZoneKey = cs.Alerts, cs.Key, cs.ZoneKey
		kept, next = append(kept, c), append(next, n)
	}
	// Cameras new to the pipeline: everything that can fail (engine spec,
	// source, models view) before anything changes.
	var added []*cameraPipe
	for _, cs := range specs {
		if _, ok := running[cs.Name]; ok {
			continue
		}
		c, err := p.prepareCamera(cs, cfg.Domain)
		if err != nil {
			return p.reloadFailed(err)
		}
		added = append(added, c)
	}
	ident, err := p.rec.identity(cfg, calibrations(specs)) // recording.go
	if err != nil {
		return p.reloadFailed(fmt.Errorf("record: the new calibration cannot be identified in the recording: %w", err))
	}
	if err := alerts.ApplyReloads(prepared); err != nil {
		if errors.Is(err, alerts.ErrNotApplied) {
			return p.reloadFailed(err)
		}
		// Every engine was reloaded or retired; a sink could not take a
		// state, the zone announcement or the removal.
		p.rl.Warn("reload sinks", "reload applied; a sink failed on the new zones' states", "err", err)
	}
	ends := 0
	for _, r := range prepared {
		ends += len(r.EndEvents())
	}
	for _, c := range removed {
		p.stopRemoved(rs, c)
	}
	for i, c := range kept {
		c.spec = next[i]
		domains[i].apply(p.log, c.name)
		c.stallNS.Store(int64(c.spec.Alerts.Events.CameraStall))
		c.snap.setZones(c.engine.Zones(), c.engine.Calibration().TauE)
		p.log.Info("reloaded zones and thresholds", "camera", c.name, "zones", len(c.engine.Zones()),
			"calibration", c.spec.Alerts.Calibration)
	}
	started := added[:0]
	for _, c := range added {
		if p.startAdded(c) {
			started = append(started, c)
		}
	}
	if len(removed) > 0 || len(started) > 0 {
		p.setCameras(rs, specs, running, started)
	}
	p.rec.setIdentity(ident) // recording.go: files name every camera's new calibration
	p.applied.Store(cfg)
	p.metrics.Reloads.Add(1)
	p.log.Info("configuration applied", "cameras", len(p.cams), "added", len(started), "removed", len(removed), "episodes_ended", ends)
	if p.sink.restartOnly(cfg.AlertsConfig) {
		p.log.Warn("reload: only zones, calibration, events and the cameras list are reloaded; vehicle, topic_prefix, mqtt, outbox, snapshots and homeassistant changes need a restart")
	}
	if len(sources) > 0 {
		p.log.Warn("reload: camera source changes need a restart (or remove the camera and add it again)", "cameras", sources)
	}
	return nil
}

// prepareCamera builds what a camera added at run time needs before the
// change commits: its engine spec (validated by building an engine
// without sinks: nothing is announced yet), its domain monitor with the
// new configuration's domain: section, a view of the shared models
// with its own buffers, and its source, opened from its spec. Nothing is
// started and nothing is visible to other goroutines.
func (p *Pipeline) prepareCamera(cs runconfig.CameraSpec, dom runconfig.DomainConfig) (*cameraPipe, error) {
	es, err := cs.EngineSpec()
	if err != nil {
		return nil, err
	}
	if _, err := alerts.NewEngine(es, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", cs.Key, err)
	}
	c := &cameraPipe{p: p, name: cs.Name, spec: cs, es: es, rl: p.rl}
	if c.dom, err = newDomainMonitor(p.domainRec, dom, es.Calibration); err != nil { // domain.go
		return nil, fmt.Errorf("%s: %w", cs.Key, err)
	}
	if c.models, err = p.models.Share(); err != nil {
		return nil, fmt.Errorf("%s: %w", cs.Key, err)
	}
	if in := cs.Source.Intrinsics; in != nil {
		if err := c.models.SetFocal(in.Fx, in.Width); err != nil {
			return nil, fmt.Errorf("%s.intrinsics: %w", cs.Key, err)
		}
	}
	if err := c.openCamera(p.log); err != nil {
		return nil, err
	}
	return c, nil
}

// startAdded gives a camera added by a committed change its metrics and
// engine (which announces its zones and their states to the sinks:
// retained states, Home Assistant discovery). It reports false when the
// engine cannot be built after all (its spec was validated before the
// commit, so only a bug gets there); the camera is then left out.
func (p *Pipeline) startAdded(c *cameraPipe) bool {
	c.metrics = p.metrics.AddCamera(c.name)
	engine, err := p.sink.newEngine(c.es, c.handleEvent)
	if engine == nil {
		p.metrics.RemoveCamera(c.metrics)
		p.log.Error("camera not added: its engine could not be built", "camera", c.name, "err", err)
		return false
	}
	if err != nil {
		p.rl.Warn("alerts announce "+c.name, "camera added; a sink failed on its zones' states", "camera", c.name, "err", err)
	}
	c.engine = engine
	c.stallNS.Store(int64(c.spec.Alerts.Events.CameraStall))
	inW, inH := p.models.InputSize()
	c.snap.init(inW, inH, inW, inH, engine.Zones(), engine.Calibration().TauE)
	c.registerMetrics()
	p.rec.addCamera(c.spec) // recording.go
	p.metrics.CamerasAdded.Add(1)
	return true
}

// stopRemoved stops a camera whose removal committed: its fetcher and
// source goroutine end (Run's wait group waits for them), what they still
// send is ignored, and its metrics series go. Its models view is left to
// the collector: its fetcher may still be staging a frame into it.
func (p *Pipeline) stopRemoved(rs *runState, c *cameraPipe) {
	c.removed = true
	c.gen.Add(1)
	if c.stop != nil {
		c.stop()
	}
	if !c.ended {
		rs.live--
	}
	p.metrics.RemoveCamera(c.metrics)
	p.rec.removeCamera(c.name) // recording.go
	p.metrics.CamerasRemoved.Add(1)
	p.log.Info("camera removed", "camera", c.name)
}

// setCameras installs the cameras in the order of specs after a change
// that added or removed some: the scheduler's ready flags follow their
// cameras, indexes are renumbered, a single camera's direct staging ends
// before a second camera's frames can run, the added cameras' fetchers
// start, and the other goroutines and the tap see the new list.
func (p *Pipeline) setCameras(rs *runState, specs []runconfig.CameraSpec, running map[string]*cameraPipe, added []*cameraPipe) {
	byName := make(map[string]*cameraPipe, len(specs))
	for _, c := range added {
		byName[c.name] = c
	}
	cams := make([]*cameraPipe, 0, len(specs))
	ready := make([]bool, 0, len(specs))
	for _, cs := range specs {
		if c, ok := running[cs.Name]; ok {
			cams, ready = append(cams, c), append(ready, rs.sched.ready[c.idx])
		} else if c, ok := byName[cs.Name]; ok {
			cams, ready = append(cams, c), append(ready, false)
		}
	}
	for i, c := range cams {
		c.idx = i
	}
	p.cams, rs.sched.ready = cams, ready
	if len(cams) > 1 {
		for _, c := range cams {
			c.stopDirect()
		}
	}
	for _, c := range added {
		c.addedNS.Store(time.Now().UnixNano())
		c.initSlots()
		p.startCamera(rs, c)
		rs.live++
		p.log.Info("camera added", "camera", c.name, "key", c.spec.Key, "zones", len(c.engine.Zones()))
	}
	p.publishCameras()
	if t, ok := p.opts.Tap.(CameraTap); ok {
		t.SetCameras(p.cameras().names())
	}
}

// stopDirect ends the camera's direct staging into the sessions' input
// (StageDirect, allowed for one camera at batch size 1 only) before a
// second camera's frames run through the sessions. A frame being staged
// directly is waited for (one resize and normalization), and a directly
// staged frame that did not run yet is dropped: the next frame of another
// camera would overwrite the input it sits in. Scheduler goroutine, with
// no batch in flight.
func (c *cameraPipe) stopDirect() {
	for {
		c.readyMu.Lock()
		if !c.direct {
			c.readyMu.Unlock()
			return
		}
		if c.directOut && c.staged == nil && !c.inFlight {
			c.readyMu.Unlock()
			time.Sleep(100 * time.Microsecond) // the fetcher is staging into the input
			continue
		}
		c.direct = false
		var drop *frameSlot
		if c.staged != nil && c.staged.st.Direct() {
			drop, c.staged, c.directOut = c.staged, nil, false
		}
		c.readyMu.Unlock()
		if drop != nil {
			c.free <- drop
		}
		return
	}
}
