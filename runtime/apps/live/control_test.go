package live

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/service/control"
)

func call(t *testing.T, method, url, body, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Didoedge-Request", "1") // what curl sends (docs/security.md)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error string `json:"error"`
	}
	if resp.StatusCode >= 400 && json.Unmarshal(b, &e) == nil {
		return resp.StatusCode, e.Error // the message as sent, unescaped
	}
	return resp.StatusCode, string(b)
}

// zonesOf waits until the pipeline assesses camera's zones under names.
func zonesOf(t *testing.T, r *rig, camera string, names ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := r.p.CameraZoneStatus(camera)
		got := make([]string, len(st))
		for i, z := range st {
			got[i] = z.Name
		}
		if strings.Join(got, ",") == strings.Join(names, ",") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("camera %s assesses zones %v, want %v", camera, got, names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestControlAPI: every change is validated before it applies (4xx naming
// the failing key, nothing changed), applied to the running pipeline
// through its reload path, counted, and written back to the config file
// with ?persist=1 (the file still loads and holds the change); profiles
// switch zones, thresholds and timings together.
func TestControlAPI(t *testing.T) {
	r := startRig(t, twoCameras, 10)
	api := "http://" + r.srv.Addr() + "/api"
	zonesOf(t, r, "left", "r0c0", "r0c1", "r0c2")

	code, body := call(t, "GET", api+"/cameras", "", "")
	var cams []control.CameraInfo
	if err := json.Unmarshal([]byte(body), &cams); code != 200 || err != nil || len(cams) != 2 || cams[0].Name != "front" ||
		cams[0].TauE != 0.000001 || cams[1].Zones.Grid == nil || cams[1].Zones.Grid.Cols != 3 {
		t.Fatalf("GET cameras: %d %s", code, body)
	}
	before, _ := os.ReadFile(r.path)
	for _, c := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"PUT", "/cameras/left/zones", `{"zones": [{"name": "a", "polygon": [[0, 0], [1.5, 0], [1, 1]]}]}`, 422, "cameras[1].zones[0].polygon"},
		{"PUT", "/cameras/left/zones", `{"zones": [{"name": "a", "polygon": [[0, 0], [1, 0], [1, 1]]}], "colour": 1}`, 400, `unknown field "colour"`},
		{"PUT", "/cameras/left/zones", `{"zones": []}`, 422, "no zones"},
		{"PUT", "/cameras/rear/zones", `{"zones": [{"name": "a", "polygon": [[0, 0], [1, 0], [1, 1]]}]}`, 404, `no camera "rear"`},
		{"PUT", "/profile", `{"name": "dusk"}`, 404, `profile: "dusk" is not one of profiles ([night])`},
		{"PUT", "/parameters", `{"/left/zones/r0c1/tau_a": -1}`, 422, "thresholds.left.tau_a_zones.r0c1: -1 must be > 0"},
		{"PUT", "/parameters", `{"/left/zones/nope/tau_e": 0.5}`, 422, `thresholds.left.tau_e_zones.nope: the camera has no zone "nope"`},
		{"PUT", "/parameters", `{"/events/exit_inertia": -1}`, 422, "alerts.events.exit_inertia: -1s is negative"},
		{"PUT", "/parameters", `{"/events/camera_stall": 1e-9}`, 422, "alerts.events.camera_stall: 1ns is below 500ms (0: off)"},
		{"PUT", "/parameters", `{"/events/update_interval": 1e-12}`, 422, "alerts.events.update_interval: 1e-12s is below 1ms (0: off)"},
		{"PUT", "/parameters", `{"/events/fusion_time_constant": 1e-12}`, 422, "alerts.events.fusion_time_constant: 1e-12s is below 1ms (0: no fusion)"},
		{"PUT", "/parameters", `{"/events/exit_inertia": 1e10}`, 422, "alerts.events.exit_inertia: 1e+10s is above 1h0m0s"},
		{"PUT", "/parameters", `{"/events/sleep": 1}`, 404, "no such parameter"},
		{"PUT", "/parameters", `{"/front/tau_e": "high"}`, 400, "is not a number"},
		{"PUT", "/cameras/left/zones", `{"zones": [{"name": "a", "polygon": [[0, 0], [0.5], [1, 1]]}]}`, 400, "polygon point [0.5]: want [x, y], two numbers, got 1"},
		{"PUT", "/cameras/left/zones", `{"zones": [{"name": "a", "polygon": [[0, 0], [], [1, 1]]}]}`, 400, "polygon point []: want [x, y], two numbers, got 0"},
		{"PUT", "/cameras/left/zones", `{"zones": [{"name": "a", "polygon": [[0, 0], [1, 0, 5], [1, 1]]}]}`, 400, "got 3"},
		{"PUT", "/cameras/left/zones", `{"zones": [{"name": "a", "polygon": [[0, 0], ["1", 0], [1, 1]]}]}`, 400, "polygon point"},
		{"PUT", "/profile", `{"name": "night"} {"name": ""}`, 400, "trailing data after the JSON value"},
		{"PUT", "/profile", `{"name": "night"}x`, 400, "trailing data after the JSON value"},
	} {
		code, body := call(t, c.method, api+c.path+"?persist=1", c.body, "")
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("%s %s %s: %d %s, want %d naming %q", c.method, c.path, c.body, code, body, c.code, c.msg)
		}
	}
	if after, _ := os.ReadFile(r.path); string(after) != string(before) {
		t.Fatalf("refused changes wrote the file:\n%s", after)
	}
	if got := r.ctl.Refused(); got != 13 { // the unknown key is refused before it reaches the control
		t.Errorf("refused %d, want 13", got)
	}
	zonesOf(t, r, "left", "r0c0", "r0c1", "r0c2")

	// A valid change, kept in the file.
	code, body = call(t, "PUT", api+"/cameras/left/zones?persist=1", `{"zones": [{"name": "kerb", "polygon": [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}]}`, "")
	if code != 200 {
		t.Fatalf("PUT zones: %d %s", code, body)
	}
	zonesOf(t, r, "left", "kerb")
	cfg, err := runconfig.Load(r.path)
	if err != nil {
		t.Fatalf("the written file does not load: %v", err)
	}
	if z := cfg.Cameras[1]; len(z.Zones) != 1 || z.Zones[0].Name != "kerb" || z.Grid != nil {
		t.Fatalf("file's left camera: %+v", z)
	}
	code, body = call(t, "PUT", api+"/parameters?persist=1", `{"/left/zones/kerb/tau_e": 0.25, "/events/min_episode": 0.5}`, "")
	if code != 200 {
		t.Fatalf("PUT parameters: %d %s", code, body)
	}
	if cfg, err = runconfig.Load(r.path); err != nil || cfg.Thresholds["left"].TauEZones["kerb"] != 0.25 || *cfg.AlertsConfig.Events.MinEpisode != 500*time.Millisecond {
		t.Fatalf("file after parameters: %+v %v", cfg.Thresholds, err)
	}

	// Profiles: night replaces front's zones and tau_e, and exit_inertia.
	if code, body = call(t, "PUT", api+"/profile", `{"name": "night"}`, ""); code != 200 {
		t.Fatalf("PUT profile: %d %s", code, body)
	}
	zonesOf(t, r, "front", "road")
	ps, _ := r.ctl.GetParameters([]string{"/front/tau_e", "/events/exit_inertia", "/left/zones/kerb/tau_e"})
	if len(ps) != 3 || param(ps, "/front/tau_e") != 0.5 || param(ps, "/events/exit_inertia") != 2.0 || param(ps, "/left/zones/kerb/tau_e") != 0.25 {
		t.Errorf("parameters under night: %v", ps)
	}
	for _, c := range []struct{ path, body, msg string }{
		{"/cameras/front/zones", `{"zones": [{"name": "a", "polygon": [[0, 0], [1, 0], [1, 1]]}]}`, `zones come from profile "night"`},
		{"/parameters", `{"/events/exit_inertia": 1}`, `profile "night" sets events.exit_inertia`},
		// Keys the profile decides: refused, not accepted without effect.
		{"/parameters", `{"/front/tau_e": 0.3}`, `/front/tau_e: profile "night" sets profiles.night.cameras.front.thresholds.tau_e`},
		{"/parameters", `{"/front/zones/road/tau_e": 0.3}`, `/front/zones/road/tau_e: camera front's zones come from profile "night" (profiles.night.cameras.front.zones)`},
		{"/parameters", `{"/left/tau_e": 0.3, "/front/tau_a": 0.2, "/front/tau_e": 0.3}`, `/front/tau_e: profile "night" sets`},
	} {
		if code, body := call(t, "PUT", api+c.path, c.body, ""); code != 409 || !strings.Contains(body, c.msg) {
			t.Errorf("PUT %s under night: %d %s", c.path, code, body)
		}
	}
	// Keys the profile leaves alone still apply under it.
	if code, body = call(t, "PUT", api+"/parameters", `{"/front/tau_a": 0.2}`, ""); code != 200 {
		t.Fatalf("PUT front's tau_a under night: %d %s", code, body)
	}
	if ps, _ := r.ctl.GetParameters([]string{"/front/tau_e", "/front/tau_a"}); param(ps, "/front/tau_e") != 0.5 || param(ps, "/front/tau_a") != 0.2 {
		t.Errorf("front under night after the refusals: %v", ps)
	}
	if code, body = call(t, "PUT", api+"/profile", `{"name": ""}`, ""); code != 200 {
		t.Fatalf("PUT profile off: %d %s", code, body)
	}
	zonesOf(t, r, "front", "r0c0", "r0c1")
	if got := r.ctl.Applied(); got != 5 {
		t.Errorf("applied %d, want 5", got)
	}

	// Control off: every change refused with 403.
	off := control.NewControl(r.p, r.cfg, false, nil)
	var e *control.Error
	if err := off.SetProfile(context.Background(), "night", false, "test"); !errors.As(err, &e) || e.Status != 403 {
		t.Errorf("control off: %v", err)
	}
}

// TestToken: with a token every request needs it (header or ?token=),
// the WebSocket upgrade included.
func TestToken(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret-token-0123456789\n"), 0o600)
	cfg := runconfig.LiveConfig{Listen: "127.0.0.1:0", TokenFile: tok}
	if err := cfg.Finish("live"); err != nil {
		t.Fatal(err)
	}
	srv, err := Listen(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := "http://" + srv.Addr()
	for _, c := range []struct {
		url, token string
		code       int
	}{
		{base + "/api/cameras", "", 401},
		{base + "/api/cameras", "wrong-token-0123456789", 401},
		{base + "/api/cameras?token=s3cret-token-0123456789", "", 503}, // authorized; nothing attached yet
		{base + "/api/cameras", "s3cret-token-0123456789", 503},
	} {
		if code, body := call(t, "GET", c.url, "", c.token); code != c.code {
			t.Errorf("%s (token %q): %d %s, want %d", c.url, c.token, code, body, c.code)
		}
	}
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("upgrade without a token: %v %v", resp.StatusCode, err)
	}
	for _, c := range []struct {
		cfg runconfig.LiveConfig
		msg string
	}{
		{runconfig.LiveConfig{Listen: "0.0.0.0:8765"}, `live.token_file: required when live.listen "0.0.0.0:8765" is not a loopback address`},
		{runconfig.LiveConfig{Listen: "127.0.0.1:8765", TokenFile: filepath.Join(dir, "none")}, `live.token_file: "` + filepath.Join(dir, "none") + `": no such file or directory`},
		{runconfig.LiveConfig{Listen: "127.0.0.1:8765", TokenFile: "/dev/zero"}, `live.token_file: "/dev/zero": not a regular file`},
		{runconfig.LiveConfig{Listen: "8765"}, `live.listen: "8765" is not host:port`},
	} {
		if err := c.cfg.Finish("live"); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.msg)
		}
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc"), 0o600)
	if err := (&runconfig.LiveConfig{Listen: "[::]:1", TokenFile: short}).Finish("live"); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("short token: %v", err)
	}
}
