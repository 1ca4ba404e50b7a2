package debugpage

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/apps/live"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/service/control"
)

// foxglovePage speaks foxglove.websocket.v1 as Foxglove does from a
// browser (new WebSocket(url, ["foxglove.websocket.v1"])): it waits for
// serverInfo, sets /events/exit_inertia and reports what came back.
const foxglovePage = `<!doctype html><script>
window.setExitInertia = (url, value) => new Promise(res => {
  const out = {statuses: []};
  let ws;
  try { ws = new WebSocket(url, ["foxglove.websocket.v1"]); } catch (e) { res(JSON.stringify({error: e.name})); return; }
  const done = () => { try { ws.close(); } catch (e) {} res(JSON.stringify(out)); };
  setTimeout(done, 5000);
  ws.onerror = () => { out.error = "error"; };
  ws.onclose = () => done();
  ws.onmessage = (e) => {
    if (typeof e.data !== "string") return;
    const m = JSON.parse(e.data);
    if (m.op === "serverInfo") {
      out.metadata = m.metadata;
      ws.send(JSON.stringify({op: "setParameters", id: "set", parameters: [{name: "/events/exit_inertia", value}]}));
    } else if (m.op === "status") {
      out.statuses.push(m);
    } else if (m.op === "parameterValues" && m.id === "set") {
      out.reply = m.parameters;
      setTimeout(done, 200); // a status may follow
    }
  };
});
window.ready = true;
</script>`

// TestFoxgloveOriginsInChromium: headless Chromium, a page of another
// origin on this machine (http://127.0.0.1:P, another local web
// application) opens the live view's Foxglove WebSocket as Foxglove does
// and sets a parameter. Without a token the change is refused (a status
// naming the proof), nothing changes, one refusal is counted; with the
// token in the URL (ws://HOST:PORT/?token=T, as a Foxglove user enters
// it) it is applied; without it that listener refuses the connection; a
// page from an origin listed in live.allowed_origins (trusted.test,
// resolved to 127.0.0.1) changes it without a token.
func TestFoxgloveOriginsInChromium(t *testing.T) {
	dir := t.TempDir()
	cfg := testRuntime(t, dir, 1, 2, "", "http: {listen: \"off\"}\n")
	ctx, p, _ := startPipeline(t, cfg)
	ctl := control.NewControl(p, cfg, true, nil)

	// The other web application's server: any Host, the same page.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	pages := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, foxglovePage)
	})}
	go pages.Serve(ln)
	defer pages.Close()

	const token = "chromium-token-0123456789"
	tokFile := filepath.Join(dir, "live.token")
	if err := os.WriteFile(tokFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := func(lc runconfig.LiveConfig) string {
		t.Helper()
		if err := lc.Finish("live"); err != nil {
			t.Fatal(err)
		}
		lv, err := live.Listen(ctx, lc, live.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lv.Close() })
		lv.Attach(p.Cameras(), ctl)
		return "ws://" + lv.Addr() + "/"
	}
	trusted := fmt.Sprintf("http://trusted.test:%d", port)
	open := listen(runconfig.LiveConfig{Listen: "127.0.0.1:0", AllowedOrigins: []string{trusted}})
	withToken := listen(runconfig.LiveConfig{Listen: "127.0.0.1:0", TokenFile: tokFile})

	exitInertia := func() float64 {
		ps, err := ctl.GetParameters([]string{"/events/exit_inertia"})
		if err != nil || len(ps) != 1 {
			t.Fatalf("parameters: %v %v", ps, err)
		}
		return ps[0].Value.(float64)
	}
	local := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := startChromium(t, local+"/", "--host-resolver-rules=MAP trusted.test 127.0.0.1")
	waitEval(t, c, `window.ready === true`, "true", 30*time.Second)
	type answer struct {
		Metadata map[string]string `json:"metadata"`
		Statuses []struct {
			Level   int    `json:"level"`
			Message string `json:"message"`
		} `json:"statuses"`
		Reply []control.Parameter `json:"reply"`
		Error string              `json:"error"`
	}
	set := func(url string, value float64) answer {
		t.Helper()
		out, err := c.evalAwait(fmt.Sprintf("window.setExitInertia(%q, %v)", url, value))
		if err != nil {
			t.Fatal(err)
		}
		var a answer
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		return a
	}

	// A page of this machine, no token: refused, counted, nothing changes.
	before, refused := exitInertia(), ctl.Refused()
	a := set(open, 3)
	if len(a.Statuses) != 1 || a.Statuses[0].Level != 2 || !strings.Contains(a.Statuses[0].Message, `(Origin "`+local+`") may only read`) ||
		a.Metadata["control"] != "false" || len(a.Reply) != 1 || a.Reply[0].Value != before {
		t.Errorf("from %s without a token: %+v; want one refusal naming the origin, the value in force", local, a)
	}
	if v := exitInertia(); v != before || ctl.Refused() != refused+1 || ctl.Applied() != 0 {
		t.Errorf("after the refused change: exit_inertia %v (was %v), refused +%d, applied %d", v, before, ctl.Refused()-refused, ctl.Applied())
	}
	// The token in the URL, as a Foxglove user enters it: applied.
	if a := set(withToken+"?token="+token, 3); len(a.Statuses) != 0 || a.Metadata["control"] != "true" || len(a.Reply) != 1 || a.Reply[0].Value != 3.0 {
		t.Errorf("from %s with the token: %+v; want applied", local, a)
	}
	if v := exitInertia(); v != 3 {
		t.Errorf("exit_inertia %v after the change with the token, want 3", v)
	}
	// That listener without the token: no connection.
	if a := set(withToken, 4); a.Error != "error" || a.Metadata != nil {
		t.Errorf("from %s without the token to the token's listener: %+v; want the connection refused", local, a)
	}
	// A listed origin, no token: applied.
	if err := c.call("Page.navigate", map[string]any{"url": trusted + "/"}, nil); err != nil {
		t.Fatal(err)
	}
	waitEval(t, c, `location.origin + " " + (window.ready === true)`, trusted+" true", 20*time.Second)
	if a := set(open, 4); len(a.Statuses) != 0 || a.Metadata["control"] != "true" || len(a.Reply) != 1 || a.Reply[0].Value != 4.0 {
		t.Errorf("from the listed %s: %+v; want applied", trusted, a)
	}
	if v := exitInertia(); v != 4 || ctl.Applied() != 2 {
		t.Errorf("exit_inertia %v, applied %d after the listed origin's change; want 4, 2", v, ctl.Applied())
	}
}
