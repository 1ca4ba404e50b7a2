package debugpage

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/apps/live"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/service/control"
)

// rebindPage is the attacker's page: served first by the attacker's server
// at http://rebind.test:PORT/, whose name then resolves to 127.0.0.1
// where the debug page listens on the same port. Its iframe does the same
// against the live view's port. Every request carries the proof header
// and JSON: same-origin to the page, so the browser lets it.
const rebindPage = `<!doctype html><script>
async function req(method, path, body) {
  try {
    const r = await fetch(path, {method, cache: "no-store", body,
      headers: {"Content-Type": "application/json", "X-Didoedge-Request": "1"}});
    return r.status + " " + (await r.text()).slice(0, 300);
  } catch (e) { return "error " + e.name; }
}
window.attack = async (frames) => {
  const out = {};
  out.page = await req("GET", "/");
  out.state = await req("GET", "/api/state");
  out.metrics = await req("GET", "/metrics");
  out.healthz = await req("GET", "/healthz");
  out.add = await req("POST", "/api/cameras", JSON.stringify({name: "rear", sequence: {dir: frames}}));
  out.remove = await req("DELETE", "/api/cameras/front");
  out.live = await new Promise(res => {
    window.onmessage = e => res(e.data);
    document.getElementById("f").contentWindow.postMessage(frames, "*");
  });
  return JSON.stringify(out);
};
</script><iframe id="f" src="http://rebind.test:LIVEPORT/frame" onload="window.ready = true"></iframe>`

const rebindFrame = `<!doctype html><script>
REQ
onmessage = async (e) => {
  const out = {};
  out.zones = await req("GET", "/api/cameras/front/zones");
  out.parameters = await req("GET", "/api/parameters");
  out.add = await req("POST", "/api/cameras", JSON.stringify({name: "rear", sequence: {dir: e.data}}));
  out.put = await req("PUT", "/api/parameters", JSON.stringify({"/events/exit_inertia": 3}));
  out.ws = await new Promise(res => {
    const ws = new WebSocket("ws://" + location.host + "/", "foxglove.websocket.v1");
    ws.onopen = () => { ws.close(); res("open"); };
    ws.onerror = () => res("error");
  });
  parent.postMessage(out, "*");
};
</script>`

// TestDNSRebindingRefusedInChromium: headless Chromium resolves
// rebind.test to 127.0.0.1 (--host-resolver-rules). A page loaded from
// http://rebind.test:P1/ (the attacker's server, which then gives the
// port to the debug page, as a rebinding DNS answer would) reads and
// changes the debug page on P1 and, from an iframe on rebind.test:P2, the
// live view's control API: every request is refused with 421 (the
// WebSocket too), and nothing changed. The positive control: the same
// requests from the real origins (http://127.0.0.1:P1/ and :P2/) with the
// proof header work; without it, or from the other port's origin (a
// cross-origin page: its preflight is refused), they do not.
func TestDNSRebindingRefusedInChromium(t *testing.T) {
	dir := t.TempDir()
	cfg := testRuntime(t, dir, 1, 2, "", "http: {listen: \"off\"}\n")
	frames := writeFrames(t, filepath.Join(dir, "rear-frames"))
	ctx, p, _ := startPipeline(t, cfg)

	// The attacker's server holds both ports first.
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := ln1.Addr().(*net.TCPAddr).Port, ln2.Addr().(*net.TCPAddr).Port
	reqJS := rebindPage[strings.Index(rebindPage, "async function req"):strings.Index(rebindPage, "window.attack")]
	evil := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Path == "/frame" {
			fmt.Fprint(w, strings.Replace(rebindFrame, "REQ", reqJS, 1))
			return
		}
		fmt.Fprint(w, strings.Replace(rebindPage, "LIVEPORT", fmt.Sprint(p2), 1))
	})}
	go evil.Serve(ln1)
	go evil.Serve(ln2)

	c := startChromium(t, fmt.Sprintf("http://rebind.test:%d/", p1), "--host-resolver-rules=MAP rebind.test 127.0.0.1")
	waitEval(t, c, `window.ready === true`, "true", 30*time.Second)
	evil.Close() // the name now leads to the vehicle's listeners

	srv, err := Start(ctx, fmt.Sprintf("127.0.0.1:%d", p1), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctl := control.NewControl(p, cfg, true, nil)
	srv.AttachControl(ctl)
	lv, err := live.Listen(ctx, runconfig.LiveConfig{Listen: fmt.Sprintf("127.0.0.1:%d", p2)}, live.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lv.Close()
	lv.Attach(p.Cameras(), ctl)
	exitInertia := func() float64 {
		ps, err := ctl.GetParameters([]string{"/events/exit_inertia"})
		if err != nil || len(ps) != 1 {
			t.Fatalf("parameters: %v %v", ps, err)
		}
		return ps[0].Value.(float64)
	}
	before := exitInertia()

	out, err := c.evalAwait(fmt.Sprintf("window.attack(%q)", frames))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("attack: %v: %s", err, out)
	}
	liveGot, _ := got["live"].(map[string]any)
	if liveGot == nil {
		t.Fatalf("no answer from the iframe: %s", out)
	}
	for k, v := range liveGot {
		got["live."+k] = v
	}
	delete(got, "live")
	for _, k := range []string{"page", "state", "metrics", "healthz", "add", "remove", "live.zones", "live.parameters", "live.add", "live.put"} {
		v, _ := got[k].(string)
		if !strings.HasPrefix(v, "421 ") || !strings.Contains(v, "rebind.test") {
			t.Errorf("rebinding page, %s: %q, want a 421 naming the Host", k, v)
		}
		t.Logf("rebinding page, %s: %.60s", k, v)
	}
	if got["live.ws"] != "error" {
		t.Errorf("rebinding page's WebSocket: %v, want refused", got["live.ws"])
	}
	if cams := strings.Join(p.Cameras(), ","); cams != "front" {
		t.Errorf("cameras after the attack: %s", cams)
	}
	if v := exitInertia(); v != before {
		t.Errorf("exit_inertia after the attack: %v, want %v", v, before)
	}

	// Positive control: the real origins, with the proof.
	navigate := func(url string) {
		t.Helper()
		if err := c.call("Page.navigate", map[string]any{"url": url}, nil); err != nil {
			t.Fatal(err)
		}
		waitEval(t, c, `location.href + " " + document.readyState`, url+" complete", 20*time.Second)
	}
	fetchJS := func(method, url, body string, proof bool) string {
		t.Helper()
		h := `{"Content-Type": "application/json"}`
		if proof {
			h = `{"Content-Type": "application/json", "X-Didoedge-Request": "1"}`
		}
		b := "undefined"
		if body != "" {
			b = fmt.Sprintf("%q", body)
		}
		v, err := c.evalAwait(fmt.Sprintf(`fetch(%q, {method: %q, headers: %s, body: %s, cache: "no-store"}).then(r => r.text().then(t => r.status + " " + t.slice(0, 200)), e => "error " + e.name)`,
			url, method, h, b))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	debugURL, liveURL := fmt.Sprintf("http://127.0.0.1:%d", p1), fmt.Sprintf("http://127.0.0.1:%d", p2)
	navigate(debugURL + "/")
	for _, r := range []struct {
		method, url, body string
		proof             bool
		want              string
	}{
		{"GET", debugURL + "/api/state", "", false, "200 "},
		{"POST", debugURL + "/api/cameras", `{"name": "rear", "sequence": {"dir": "` + frames + `"}}`, false, "403 "},
		// The live API from the debug page's origin is cross-origin: the
		// proof header needs a preflight, which is refused.
		{"PUT", liveURL + "/api/parameters", `{"/events/exit_inertia": 3}`, true, "error TypeError"},
		{"POST", debugURL + "/api/cameras", `{"name": "rear", "sequence": {"dir": "` + frames + `"}}`, true, "200 "},
	} {
		if v := fetchJS(r.method, r.url, r.body, r.proof); !strings.HasPrefix(v, r.want) {
			t.Errorf("from %s: %s %s (proof %v): %q, want %q", debugURL, r.method, r.url, r.proof, v, r.want)
		}
	}
	if cams := strings.Join(p.Cameras(), ","); cams != "front,rear" {
		t.Errorf("cameras after the real page's add: %s", cams)
	}
	if v := exitInertia(); v != before {
		t.Errorf("exit_inertia after a cross-origin PUT: %v, want %v", v, before)
	}
	navigate(liveURL + "/")
	for _, r := range []struct {
		method, url, body string
		proof             bool
		want              string
	}{
		{"GET", liveURL + "/api/cameras/front/zones", "", false, "200 "},
		{"PUT", liveURL + "/api/parameters", `{"/events/exit_inertia": 3}`, false, "403 "},
		{"PUT", liveURL + "/api/parameters", `{"/events/exit_inertia": 3}`, true, "200 "},
	} {
		if v := fetchJS(r.method, r.url, r.body, r.proof); !strings.HasPrefix(v, r.want) {
			t.Errorf("from %s: %s %s (proof %v): %q, want %q", liveURL, r.method, r.url, r.proof, v, r.want)
		}
	}
	if v := exitInertia(); v != 3 {
		t.Errorf("exit_inertia after the real origin's PUT: %v, want 3", v)
	}
}
