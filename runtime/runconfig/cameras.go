package runconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/yamlstrict"
)

// ErrCameraExists and ErrNoCamera classify AddCamera's and RemoveCamera's
// refusals that are not a key's bad value (a control API answers 409 and
// 404 for them).
var (
	ErrCameraExists = errors.New("camera exists")
	ErrNoCamera     = errors.New("no such camera")
	ErrLastCamera   = errors.New("last camera")
	ErrCameraLimit  = errors.New("camera limit")
)

// ParseCameraEntry decodes one item of the cameras list (YAML, or JSON,
// which is YAML) strictly: unknown keys are refused and named, as in the
// file.
func ParseCameraEntry(data []byte) (CameraEntry, error) {
	var e CameraEntry
	if err := yamlstrict.Decode(data, &e); err != nil {
		return CameraEntry{}, err
	}
	return e, nil
}

// AddCamera appends camera e to the configuration at run time (the
// control API), validated as the file's loader validates a cameras item:
// its name, source, intrinsics, calibration and zones, with relative
// paths taken from the config file's directory. A configuration in the
// single camera form becomes a cameras list first: the camera section
// with alerts.camera as its name, the alerts section's zones staying the
// default of every camera. Errors name the key the camera would have
// (cameras[i].url); a name in use wraps ErrCameraExists. c is changed
// only on success; AddCamera replaces c.Cameras, never edits it in place.
func (c *Config) AddCamera(e CameraEntry) error {
	list := c.Cameras
	single := len(list) == 0
	if single {
		list = []CameraEntry{{Name: c.AlertsConfig.Camera, CameraConfig: c.Camera}}
	}
	i := len(list)
	key := fmt.Sprintf("cameras[%d]", i)
	if max := c.Pipeline.MaxCameras; max > 0 && i >= max {
		return fmt.Errorf("%s: %d cameras already, the most pipeline.max_cameras allows: %w", key, i, ErrCameraLimit)
	}
	switch err := alerts.ValidCamera(e.Name); {
	case e.Name == "":
		return fmt.Errorf("%s.name: empty; every camera needs a name (its topic level)", key)
	case err != nil:
		return fmt.Errorf("%s.name: %w", key, err)
	}
	for j, o := range list {
		if o.Name == e.Name {
			return fmt.Errorf("%s.name: %q is also cameras[%d].name: %w", key, e.Name, j, ErrCameraExists)
		}
	}
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(c.dir, *p)
		}
	}
	if e.Sequence != nil {
		q := *e.Sequence // the caller's entry stays as given
		abs(&q.Dir)
		e.Sequence = &q
	}
	abs(&e.IntrinsicsFile)
	abs(&e.Calibration)
	for _, f := range []struct{ key, path string }{{"calibration", e.Calibration}, {"intrinsics_file", e.IntrinsicsFile}} {
		if err := c.checkAllowed(key+"."+f.key, f.path); err != nil {
			return err
		}
	}
	if e.Sequence != nil {
		if err := c.checkAllowed(key+".sequence.dir", e.Sequence.Dir); err != nil {
			return err
		}
	}
	if err := e.CameraConfig.validate(key); err != nil {
		return err
	}
	if c.Depth.IO != nil && c.Depth.IO.Depth.NeedsFocal() && e.Intrinsics == nil {
		return fmt.Errorf("%s.intrinsics: the depth model %q reads depth for a canonical camera (depth.canonical_focal %g): give the camera's intrinsics or intrinsics_file",
			key, c.Depth.Model, c.Depth.IO.Depth.CanonicalFocal)
	}
	next := *c
	next.Cameras = append(append(make([]CameraEntry, 0, i+1), list...), e)
	if single {
		next.Camera = CameraConfig{}
		next.AlertsConfig.Camera = ""
	}
	specs, err := next.CameraSpecs()
	if err != nil {
		return err
	}
	cs := specs[i]
	if _, err := cs.EngineSpec(); err != nil {
		return err
	}
	if next.Depth.IO != nil && next.Depth.IO.Relative() {
		if err := next.checkRelative(cs.Alerts); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	if err := next.checkConfidence(cs.Alerts); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	*c = next
	return nil
}

// ErrNotAllowed classifies a path of a control request outside
// live.allowed_dirs.
var ErrNotAllowed = errors.New("not under live.allowed_dirs")

// AllowedDirs returns the directories a control request may name files in:
// live.allowed_dirs, or the config file's directory; none for a
// configuration parsed from memory without a directory.
func (c *Config) AllowedDirs() []string {
	if len(c.Live.AllowedDirs) > 0 {
		return c.Live.AllowedDirs
	}
	if c.dir == "" {
		return nil
	}
	return []string{c.dir}
}

// checkAllowed refuses a path ("" passes) that is not inside one of
// AllowedDirs once symbolic links are resolved (a link in the directory
// to /etc/shadow is outside it). The file is not opened: a refused path
// is never read, so its error says nothing of its content.
func (c *Config) checkAllowed(key, path string) error {
	if path == "" {
		return nil
	}
	dirs := c.AllowedDirs()
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s: %q: %w", key, path, err)
	}
	for _, d := range dirs {
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(rd, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil
		}
	}
	return fmt.Errorf("%s: %q is %w %v: a control request may name files only there", key, path, ErrNotAllowed, dirs)
}

// RemoveCamera removes the named camera from the configuration at run
// time, with its threshold overrides and its entries in every profile
// (so that the configuration still loads). It returns the camera's index
// in the cameras list. An unknown camera wraps ErrNoCamera, the only
// camera ErrLastCamera. c is changed only on success; slices and maps
// are replaced, never edited in place.
func (c *Config) RemoveCamera(name string) (int, error) {
	if len(c.Cameras) <= 1 {
		if (len(c.Cameras) == 0 && c.AlertsConfig.Camera == name) || (len(c.Cameras) == 1 && c.Cameras[0].Name == name) {
			return 0, fmt.Errorf("cameras: %q is the only camera; a pipeline needs one: %w", name, ErrLastCamera)
		}
	}
	i := -1
	names := make([]string, len(c.Cameras))
	for j, e := range c.Cameras {
		names[j] = e.Name
		if e.Name == name {
			i = j
		}
	}
	if i < 0 {
		if len(c.Cameras) == 0 {
			names = []string{c.AlertsConfig.Camera}
		}
		return 0, fmt.Errorf("cameras: no camera %q (cameras: %s): %w", name, strings.Join(names, ", "), ErrNoCamera)
	}
	next := *c
	next.Cameras = append(append(make([]CameraEntry, 0, len(c.Cameras)-1), c.Cameras[:i]...), c.Cameras[i+1:]...)
	if _, ok := c.Thresholds[name]; ok {
		next.Thresholds = maps.Clone(c.Thresholds)
		delete(next.Thresholds, name)
	}
	next.Profiles = make(map[string]Profile, len(c.Profiles))
	for pn, p := range c.Profiles {
		if _, ok := p.Cameras[name]; ok {
			p.Cameras = maps.Clone(p.Cameras)
			delete(p.Cameras, name)
		}
		next.Profiles[pn] = p
	}
	if c.Profiles == nil {
		next.Profiles = nil
	}
	*c = next
	return i, nil
}
