package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

// Applier applies a configuration held in memory to the running cameras
// (zones, calibrations, events), all or nothing; *stream.Pipeline does.
type Applier interface {
	Apply(ctx context.Context, cfg *runconfig.Config) error
}

// Control is the run-time control of a pipeline: the configuration now in
// force (the file's, with the changes applied since), and the operations
// of the control API and of Foxglove's parameters. Every change is built
// on a copy, validated (every camera's engine spec), applied through the
// pipeline's reload path, then kept; refused changes change nothing.
// Changes are logged and counted, and written to the config file when
// asked (persist).
type Control struct {
	p       Applier
	log     *slog.Logger
	enabled bool

	mu  sync.Mutex // serializes changes
	cfg *runconfig.Config

	applied, refused atomic.Uint64
}

// NewControl controls p, whose configuration is cfg; enabled false
// refuses every change (live.control).
func NewControl(p Applier, cfg *runconfig.Config, enabled bool, log *slog.Logger) *Control {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Control{p: p, log: log, enabled: enabled, cfg: cfg}
}

// RegisterMetrics exports the changes applied and refused
// (didoedge_live_changes_*) when no live server does (Server.RegisterMetrics
// exports them otherwise): the MQTT set topics without the live view.
func (c *Control) RegisterMetrics(m *stream.Metrics) {
	m.CounterFunc("didoedge_live_changes_applied_total", "Control API, MQTT set topic and parameter changes applied.",
		func() float64 { return float64(c.applied.Load()) })
	m.CounterFunc("didoedge_live_changes_refused_total", "Control API, MQTT set topic and parameter changes refused (invalid, or control off).",
		func() float64 { return float64(c.refused.Load()) })
}

// Applied is the number of changes applied so far.
func (c *Control) Applied() uint64 { return c.applied.Load() }

// Refused is the number of changes refused so far.
func (c *Control) Refused() uint64 { return c.refused.Load() }

// Refuse counts and logs a change refused before it reached the control
// (a WebSocket connection without the proof to change the vehicle): one
// refusal, as a change refused here would count.
func (c *Control) Refuse(what, who string, err error) {
	c.refused.Add(1)
	c.log.Warn("live control: change refused", "change", what, "by", who, "err", err)
}

// Config returns the configuration in force (do not modify it).
func (c *Control) Config() *runconfig.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// Error is a refused change: Status is the HTTP status (4xx).
type Error struct {
	Status int
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func refuse(status int, format string, a ...any) error {
	return &Error{Status: status, Err: fmt.Errorf(format, a...)}
}

// change applies edit to a copy of the configuration in force; what
// describes it in the log. persist writes the edited keys to the file
// (persistFn edits the YAML document).
func (c *Control) change(ctx context.Context, what, who string, edit func(cfg *runconfig.Config) error, persist func(doc *yamlDoc) error) (err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() {
		if err != nil {
			c.refused.Add(1)
			c.log.Warn("live control: change refused", "change", what, "by", who, "err", err)
		}
	}()
	if !c.enabled && !viaMQTT(ctx) {
		return refuse(http.StatusForbidden, "control is off (live.control: false, the default on a non-loopback live.listen)")
	}
	next := cloneConfig(c.cfg)
	if err := edit(next); err != nil {
		return err
	}
	specs, err := next.CameraSpecs()
	if err != nil {
		return refuse(http.StatusUnprocessableEntity, "%w", err)
	}
	for _, cs := range specs {
		if _, err := cs.EngineSpec(); err != nil {
			return refuse(http.StatusUnprocessableEntity, "%w", err)
		}
	}
	// With persist, the file is edited, checked and written beside itself
	// first: a file that cannot take the change refuses it before
	// anything applies. Apply and the file's replacement are then one
	// step: the rename follows a successful Apply, and the rare rename
	// that fails after it undoes the Apply.
	var pending *pendingWrite
	if persist != nil {
		if pending, err = prepareWrite(next.Path, persist); err != nil {
			return refuse(http.StatusConflict, "persist: nothing changed: %w", err)
		}
	}
	if err := c.p.Apply(ctx, next); err != nil {
		if pending != nil {
			pending.abort()
		}
		return refuse(http.StatusUnprocessableEntity, "apply: %w", err)
	}
	if pending != nil {
		if err := pending.commit(); err != nil {
			// c.cfg is still what was in force before: put it back.
			if rerr := c.p.Apply(context.WithoutCancel(ctx), c.cfg); rerr != nil {
				c.log.Error("live control: the change could not be written nor undone; the pipeline runs it until the next change or SIGHUP",
					"change", what, "err", err, "undo", rerr)
				c.cfg = next
				return &Error{Status: http.StatusInternalServerError, Err: fmt.Errorf("persist: applied, not written, and not undone (%v): %w", rerr, err)}
			}
			return &Error{Status: http.StatusInternalServerError, Err: fmt.Errorf("persist: not written, the change was undone: %w", err)}
		}
	}
	c.cfg = next
	c.applied.Add(1)
	c.log.Info("live control: change applied", "change", what, "by", who, "persist", persist != nil)
	return nil
}

// cloneConfig copies what changes edit (they replace slices and maps,
// never modify them in place).
func cloneConfig(c *runconfig.Config) *runconfig.Config {
	cp := *c
	cp.Cameras = slices.Clone(c.Cameras)
	cp.Thresholds = maps.Clone(c.Thresholds)
	return &cp
}

// CameraInfo is a camera as the API lists it.
type CameraInfo struct {
	Name       string               `json:"name"`
	Key        string               `json:"key"`
	Zones      ZoneSetJSON          `json:"zones"`
	ZonesFrom  string               `json:"zones_from"`
	Thresholds runconfig.Thresholds `json:"thresholds"`
	TauE       float64              `json:"tau_e"`
	TauA       float64              `json:"tau_a"`
}

// ZoneSetJSON is alerts.ZoneSet in the API's JSON.
type ZoneSetJSON struct {
	Zones  []ZoneJSON       `json:"zones"`
	Grid   *alerts.GridSpec `json:"grid,omitempty"`
	Ignore []ZoneJSON       `json:"ignore,omitempty"`
}

// ZoneJSON is one named polygon, normalized coordinates.
type ZoneJSON struct {
	Name    string  `json:"name"`
	Polygon []Point `json:"polygon"`
}

// Point is a polygon's point, exactly [x, y] (two numbers; their range,
// [0,1], is the zone validation's): encoding/json would fill a [2]float64
// from [0.5] or [] with zeros, repairing a malformed point silently.
type Point [2]float64

// UnmarshalJSON refuses anything but two numbers.
func (p *Point) UnmarshalJSON(b []byte) error {
	var v []float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("polygon point %s: want [x, y], two numbers: %w", b, err)
	}
	if len(v) != 2 {
		return fmt.Errorf("polygon point %s: want [x, y], two numbers, got %d", b, len(v))
	}
	p[0], p[1] = v[0], v[1]
	return nil
}

func points(in [][2]float64) []Point {
	out := make([]Point, len(in))
	for i, q := range in {
		out[i] = Point(q)
	}
	return out
}

func zoneSetJSON(zs alerts.ZoneSet) ZoneSetJSON {
	conv := func(in []alerts.ZoneSpec) []ZoneJSON {
		out := make([]ZoneJSON, len(in))
		for i, z := range in {
			out[i] = ZoneJSON{Name: z.Name, Polygon: points(z.Polygon)}
		}
		return out
	}
	return ZoneSetJSON{Zones: conv(zs.Zones), Grid: zs.Grid, Ignore: conv(zs.Ignore)}
}

func (z ZoneSetJSON) zoneSet() alerts.ZoneSet {
	conv := func(in []ZoneJSON) []alerts.ZoneSpec {
		if in == nil {
			return nil
		}
		out := make([]alerts.ZoneSpec, len(in))
		for i, x := range in {
			poly := make([][2]float64, len(x.Polygon))
			for j, q := range x.Polygon {
				poly[j] = q
			}
			out[i] = alerts.ZoneSpec{Name: x.Name, Polygon: poly}
		}
		return out
	}
	return alerts.ZoneSet{Zones: conv(z.Zones), Grid: z.Grid, Ignore: conv(z.Ignore)}
}

// Cameras lists the cameras with their zones and thresholds in force.
func (c *Control) Cameras() ([]CameraInfo, error) {
	cfg := c.Config()
	specs, err := cfg.CameraSpecs()
	if err != nil {
		return nil, err
	}
	out := make([]CameraInfo, 0, len(specs))
	for _, cs := range specs {
		info := CameraInfo{Name: cs.Name, Key: cs.Key, Zones: zoneSetJSON(cs.Alerts.ZoneSet), ZonesFrom: cs.ZoneKey, Thresholds: cs.Thresholds}
		if es, err := cs.EngineSpec(); err == nil {
			info.TauE, info.TauA = es.Calibration.TauE, es.Calibration.TauA
		}
		out = append(out, info)
	}
	return out, nil
}

// cameraIndex returns the camera's index in cfg.Cameras (-1: the single
// camera form) and whether the camera exists.
func cameraIndex(cfg *runconfig.Config, name string) (int, bool) {
	if len(cfg.Cameras) == 0 {
		return -1, cfg.AlertsConfig.Camera == name
	}
	for i, e := range cfg.Cameras {
		if e.Name == name {
			return i, true
		}
	}
	return 0, false
}

// SetZones replaces a camera's zones (zones, grid and ignore masks).
func (c *Control) SetZones(ctx context.Context, camera string, zs ZoneSetJSON, persist bool, who string) error {
	set := zs.zoneSet()
	edit := func(cfg *runconfig.Config) error {
		i, ok := cameraIndex(cfg, camera)
		if !ok {
			return refuse(http.StatusNotFound, "no camera %q", camera)
		}
		if p, ok := cfg.Profiles[cfg.Profile]; ok && p.Cameras[camera].HasZones() {
			return refuse(http.StatusConflict, "camera %s: its zones come from profile %q (profiles.%s.cameras.%s); switch the profile off first",
				camera, cfg.Profile, cfg.Profile, camera)
		}
		if !set.HasZones() {
			return refuse(http.StatusUnprocessableEntity, "zones: no zones: give zones or grid")
		}
		if i < 0 {
			cfg.AlertsConfig.Config.ZoneSet = set
		} else {
			cfg.Cameras[i].ZoneSet = set
		}
		return nil
	}
	var pf func(*yamlDoc) error
	if persist {
		pf = func(d *yamlDoc) error {
			// The camera's place in the file, by name: cameras added or
			// removed in memory only move the indexes.
			base, err := d.cameraPath(camera)
			if err != nil {
				return err
			}
			for _, kv := range []struct {
				key string
				v   any
				set bool
			}{{"zones", set.Zones, len(set.Zones) > 0}, {"grid", set.Grid, set.Grid != nil}, {"ignore", set.Ignore, len(set.Ignore) > 0}} {
				if err := d.set(append(slices.Clone(base), kv.key), kv.v, kv.set); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return c.change(ctx, "zones of camera "+camera, who, edit, pf)
}

// AddCamera adds a camera at run time from its cameras item (JSON, or
// YAML: the keys of a cameras: item of the file, unknown ones refused):
// validated as the file's loader validates it, then started by the
// pipeline through the same all-or-nothing path as every change. With
// persist the item (as sent) is appended to the file's cameras list (a
// single camera file becomes a list first).
func (c *Control) AddCamera(ctx context.Context, body []byte, persist bool, who string) error {
	e, err := runconfig.ParseCameraEntry(body)
	if err == nil {
		err = singleDocument(body)
	}
	if err != nil {
		c.refused.Add(1)
		c.log.Warn("live control: change refused", "change", "add camera", "by", who, "err", err)
		return refuse(http.StatusBadRequest, "camera: %w", err)
	}
	edit := func(cfg *runconfig.Config) error {
		if err := cfg.AddCamera(e); err != nil {
			switch {
			case errors.Is(err, runconfig.ErrCameraExists), errors.Is(err, runconfig.ErrCameraLimit):
				return refuse(http.StatusConflict, "%w", err)
			case errors.Is(err, runconfig.ErrNotAllowed):
				return refuse(http.StatusForbidden, "%w", err)
			}
			return refuse(http.StatusUnprocessableEntity, "%w", err)
		}
		return nil
	}
	var pf func(*yamlDoc) error
	if persist {
		var doc yaml.Node
		if err := yaml.Unmarshal(body, &doc); err != nil || len(doc.Content) == 0 {
			return refuse(http.StatusBadRequest, "camera: %v", err)
		}
		item := doc.Content[0]
		blockStyle(item)
		pf = func(d *yamlDoc) error { return d.addCamera(item) }
	}
	return c.change(ctx, "add camera "+e.Name, who, edit, pf)
}

// singleDocument refuses a body with more than one YAML document (JSON
// is YAML): what follows the first would be silently ignored.
func singleDocument(body []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(body))
	var first, second yaml.Node
	if err := dec.Decode(&first); err != nil {
		return err
	}
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the body (a second document)")
	}
	return nil
}

// RemoveCamera removes a camera at run time: its open episodes end
// (end events queued with every other change's, all or nothing), its
// retained MQTT states and Home Assistant configs are cleared, its
// metrics series go. Its threshold overrides and profile entries go with
// it; with persist also from the file.
func (c *Control) RemoveCamera(ctx context.Context, camera string, persist bool, who string) error {
	edit := func(cfg *runconfig.Config) error {
		if _, err := cfg.RemoveCamera(camera); err != nil {
			switch {
			case errors.Is(err, runconfig.ErrNoCamera):
				return refuse(http.StatusNotFound, "%w", err)
			case errors.Is(err, runconfig.ErrLastCamera):
				return refuse(http.StatusConflict, "%w", err)
			}
			return refuse(http.StatusUnprocessableEntity, "%w", err)
		}
		return nil
	}
	var pf func(*yamlDoc) error
	if persist {
		pf = func(d *yamlDoc) error {
			if err := d.removeCamera(camera); err != nil {
				return err
			}
			if err := d.set([]any{"thresholds", camera}, nil, false); err != nil {
				return err
			}
			if ps := d.get("profiles"); ps != nil && ps.Kind == yaml.MappingNode {
				for k := 0; k+1 < len(ps.Content); k += 2 {
					if err := d.set([]any{"profiles", ps.Content[k].Value, "cameras", camera}, nil, false); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	return c.change(ctx, "remove camera "+camera, who, edit, pf)
}

// Profiles returns the active profile and the names of all.
func (c *Control) Profiles() (active string, names []string) {
	cfg := c.Config()
	return cfg.Profile, slices.Sorted(maps.Keys(cfg.Profiles))
}

// SetProfile switches to profile name ("" for none).
func (c *Control) SetProfile(ctx context.Context, name string, persist bool, who string) error {
	edit := func(cfg *runconfig.Config) error {
		if _, ok := cfg.Profiles[name]; name != "" && !ok {
			return refuse(http.StatusNotFound, "profile: %q is not one of profiles (%v)", name, slices.Sorted(maps.Keys(cfg.Profiles)))
		}
		cfg.Profile = name
		return nil
	}
	var pf func(*yamlDoc) error
	if persist {
		pf = func(d *yamlDoc) error { return d.set([]any{"profile"}, name, name != "") }
	}
	return c.change(ctx, fmt.Sprintf("profile %q", name), who, edit, pf)
}

// ServeHTTP serves the control API under /api/.
func (c *Control) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mux := http.NewServeMux()
	who := "http " + r.RemoteAddr
	persist := r.URL.Query().Get("persist") == "1"
	mux.HandleFunc("GET /api/cameras", func(w http.ResponseWriter, r *http.Request) {
		cams, err := c.Cameras()
		if err != nil {
			HTTPError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, cams)
	})
	mux.HandleFunc("POST /api/cameras", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			HTTPError(w, http.StatusBadRequest, "request body: "+err.Error())
			return
		}
		c.reply(w, c.AddCamera(r.Context(), body, persist, who))
	})
	mux.HandleFunc("DELETE /api/cameras/{camera}", func(w http.ResponseWriter, r *http.Request) {
		c.reply(w, c.RemoveCamera(r.Context(), r.PathValue("camera"), persist, who))
	})
	mux.HandleFunc("GET /api/cameras/{camera}/zones", func(w http.ResponseWriter, r *http.Request) {
		cams, _ := c.Cameras()
		for _, cam := range cams {
			if cam.Name == r.PathValue("camera") {
				writeJSON(w, cam.Zones)
				return
			}
		}
		HTTPError(w, http.StatusNotFound, fmt.Sprintf("no camera %q", r.PathValue("camera")))
	})
	mux.HandleFunc("PUT /api/cameras/{camera}/zones", func(w http.ResponseWriter, r *http.Request) {
		var zs ZoneSetJSON
		if !decodeBody(w, r, &zs) {
			return
		}
		c.reply(w, c.SetZones(r.Context(), r.PathValue("camera"), zs, persist, who))
	})
	mux.HandleFunc("GET /api/profiles", func(w http.ResponseWriter, r *http.Request) {
		active, names := c.Profiles()
		writeJSON(w, map[string]any{"active": active, "profiles": names})
	})
	mux.HandleFunc("PUT /api/profile", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Name string `json:"name"`
		}
		if !decodeBody(w, r, &body) {
			return
		}
		c.reply(w, c.SetProfile(r.Context(), body.Name, persist, who))
	})
	mux.HandleFunc("GET /api/parameters", func(w http.ResponseWriter, r *http.Request) {
		ps, err := c.GetParameters(nil)
		if err != nil {
			HTTPError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, ps)
	})
	mux.HandleFunc("PUT /api/parameters", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if !decodeBody(w, r, &body) {
			return
		}
		ps := make([]Parameter, 0, len(body))
		for _, k := range slices.Sorted(maps.Keys(body)) {
			ps = append(ps, Parameter{Name: k, Value: body[k]})
		}
		_, err := c.setParameters(r.Context(), ps, persist, who)
		c.reply(w, err)
	})
	mux.ServeHTTP(w, r)
}

// reply answers a change: 200 with the configuration's cameras, or the
// refusal's status and message.
func (c *Control) reply(w http.ResponseWriter, err error) {
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			HTTPError(w, e.Status, e.Error())
			return
		}
		HTTPError(w, http.StatusInternalServerError, err.Error())
		return
	}
	active, _ := c.Profiles()
	cams, _ := c.Cameras()
	writeJSON(w, map[string]any{"ok": true, "profile": active, "cameras": cams})
}

// decodeBody reads a JSON body strictly (unknown keys are refused, named;
// so is anything after the JSON value).
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, maxBody), v); err != nil {
		HTTPError(w, http.StatusBadRequest, "request body: "+err.Error())
		return false
	}
	return true
}

// maxBody bounds a request body.
const maxBody = 1 << 20

// decodeJSON decodes exactly one JSON value from r into v, unknown keys
// refused: trailing bytes (a second value, garbage) are an error, not
// ignored.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		HTTPError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Write(buf.Bytes())
}

// ReloadFile re-reads the config file and applies it (SIGHUP while the
// live control runs): the file replaces the changes made since, except
// those written back with persist.
func (c *Control) ReloadFile(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.Path == "" {
		return errors.New("reload: the configuration was not read from a file (built-in defaults): nothing to reload")
	}
	fresh, err := runconfig.Load(c.cfg.Path)
	if err != nil {
		c.log.Error("reload failed; keeping the current zones and thresholds", "err", err)
		return err
	}
	if err := c.p.Apply(ctx, fresh); err != nil {
		return err
	}
	c.cfg = fresh
	return nil
}

// HTTPError writes a JSON error reply {"error": msg} with the status code.
func HTTPError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
