package live

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostileTimeout is the longest a control request may take under a
// probe (issue 38's goal: no hang over 5 s).
const hostileTimeout = 5 * time.Second

// probe sends one request as an attacker would (host and headers as
// given) with the 5 s bound, and returns the status and the body.
func probe(t *testing.T, method, url, host, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: hostileTimeout}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v after %v (the bound is %v)", method, url, err, time.Since(start).Round(time.Millisecond), hostileTimeout)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// rssMB is this process's resident set (VmRSS), in MB.
func rssMB(t *testing.T) float64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestHostileControlProbes replays issue 38's probes of the live
// listener and its control API (findings 4, 6, 7, 8, 10) against a
// running pipeline: every one is refused with its status and a message
// naming the key or the bound, within 5 s, nothing changes, the control
// still answers afterwards, and the camera flood stops at
// pipeline.max_cameras with the process under 300 MB. docs/security.md
// lists them.
func TestHostileControlProbes(t *testing.T) {
	r := startRig(t, twoCameras, 10)
	base := "http://" + r.srv.Addr()
	api := base + "/api"
	proof := map[string]string{"X-Didoedge-Request": "1"}
	before, _ := os.ReadFile(r.path)
	paramsBefore, err := r.ctl.GetParameters(nil)
	if err != nil {
		t.Fatal(err)
	}
	probes := []struct {
		name, method, path, host, body string
		header                         map[string]string
		code                           int
		msg                            string
	}{
		{"rebinding Host reads zones", "GET", "/cameras/front/zones", "rebind.test:8765", "", nil, 421, `Host \"rebind.test:8765\" is not a name this listener serves`},
		{"rebinding Host changes parameters", "PUT", "/parameters", "evil.example:8765", `{"/front/tau_e": 0.9}`, proof, 421, "DNS rebinding"},
		{"no proof header", "POST", "/cameras", "", `{"name": "rear", "url": "rtsp://127.0.0.1/r"}`, nil, 403, "X-Didoedge-Request"},
		{"CORS preflight", "OPTIONS", "/parameters", "", "", map[string]string{"Origin": "http://evil.example"}, 403, "no CORS"},
		{"camera_stall 1e-9", "PUT", "/parameters", "", `{"/events/camera_stall": 1e-9}`, proof, 422, "alerts.events.camera_stall: 1ns is below 500ms"},
		{"update_interval 1e-12", "PUT", "/parameters", "", `{"/events/update_interval": 1e-12}`, proof, 422, "alerts.events.update_interval: 1e-12s is below 1ms"},
		{"fusion_time_constant 1e-12", "PUT", "/parameters", "", `{"/events/fusion_time_constant": 1e-12}`, proof, 422, "alerts.events.fusion_time_constant: 1e-12s is below 1ms"},
		{"exit_inertia 1e10", "PUT", "/parameters", "", `{"/events/exit_inertia": 1e10}`, proof, 422, "alerts.events.exit_inertia: 1e+10s is above 1h0m0s"},
		{"zone point [0.5]", "PUT", "/cameras/left/zones", "", `{"zones": [{"name": "a", "polygon": [[0, 0], [0.5], [1, 1]]}]}`, proof, 400, "polygon point [0.5]"},
		{"zone point []", "PUT", "/cameras/left/zones", "", `{"zones": [{"name": "a", "polygon": [[0, 0], [], [1, 1]]}]}`, proof, 400, "polygon point []"},
		{"trailing bytes", "PUT", "/profile", "", `{"name": "night"}{"name": ""}`, proof, 400, "trailing data after the JSON value"},
		{"trailing document", "POST", "/cameras", "", "{\"name\": \"rear\", \"url\": \"rtsp://127.0.0.1/r\"}\n---\n{}\n", proof, 400, "trailing data after the body"},
		{"50 MB body", "POST", "/cameras", "", `{"name": "` + strings.Repeat("a", 50<<20) + `"}`, proof, 400, "request body too large"},
	}
	for _, p := range probes {
		code, body := probe(t, p.method, api+p.path, p.host, p.body, p.header)
		if code != p.code || !strings.Contains(body, p.msg) {
			t.Errorf("probe %q: %d %.300s, want %d naming %q", p.name, code, body, p.code, p.msg)
		}
	}
	// Under profile night, which sets front's tau_e: refused, not dropped.
	if code, body := probe(t, "PUT", api+"/profile", "", `{"name": "night"}`, proof); code != 200 {
		t.Fatalf("profile night: %d %s", code, body)
	}
	if code, body := probe(t, "PUT", api+"/parameters", "", `{"/front/tau_e": 0.3}`, proof); code != 409 || !strings.Contains(body, `profile \"night\" sets profiles.night.cameras.front.thresholds.tau_e`) {
		t.Errorf("a key the profile sets: %d %s", code, body)
	}
	if code, body := probe(t, "PUT", api+"/profile", "", `{"name": ""}`, proof); code != 200 {
		t.Fatalf("profile off: %d %s", code, body)
	}
	paramsAfter, err := r.ctl.GetParameters(nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(paramsAfter) != fmt.Sprint(paramsBefore) {
		t.Errorf("the probes changed parameters:\n%v\n%v", paramsBefore, paramsAfter)
	}
	if after, _ := os.ReadFile(r.path); string(after) != string(before) {
		t.Errorf("the probes wrote the config file")
	}

	// Persist onto a read-only file: refused before it applies.
	os.Chmod(r.path, 0o444)
	if code, body := probe(t, "PUT", api+"/profile?persist=1", "", `{"name": "night"}`, proof); code != 409 || !strings.Contains(body, "read-only (mode 0444)") {
		t.Errorf("persist onto 0444: %d %s", code, body)
	}
	if active, _ := r.ctl.Profiles(); active != "" || r.p.Config().Profile != "" {
		t.Errorf("persist onto 0444 applied profile %q", active)
	}
	os.Chmod(r.path, 0o644)

	// Camera flood: 2 running, 14 more accepted, then 409 at the limit.
	writeFrames(t, filepath.Join(r.dir, "flood"), 2)
	accepted, refused := 0, 0
	for i := range 20 {
		code, body := probe(t, "POST", api+"/cameras", "", fmt.Sprintf(`{"name": "c%d", "sequence": {"dir": "flood", "fps": 2, "loop": true}}`, i), proof)
		switch {
		case code == 200:
			accepted++
		case code == 409 && strings.Contains(body, "the most pipeline.max_cameras allows"):
			refused++
		default:
			t.Fatalf("camera c%d: %d %s", i, code, body)
		}
	}
	if accepted != 14 || refused != 6 || len(r.p.Cameras()) != 16 {
		t.Errorf("camera flood: %d accepted, %d refused, %d running; want 14, 6, 16", accepted, refused, len(r.p.Cameras()))
	}
	if code, _ := probe(t, "GET", api+"/cameras", "", "", nil); code != 200 {
		t.Errorf("the control does not answer after the probes: %d", code)
	}
	if mb := rssMB(t); mb > 300 {
		t.Errorf("RSS %.0f MB after the probes, goal < 300 MB", mb)
	} else {
		t.Logf("RSS %.0f MB after %d probes and the camera flood", mb, len(probes)+3)
	}
}
