package debugpage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/didoedge/didoedge/alerts"
)

const chromiumPath = "/usr/bin/chromium"

// cdp is a minimal Chrome DevTools Protocol client for one page.
type cdp struct {
	conn *websocket.Conn
	id   int
}

func (c *cdp) call(method string, params any, result any) error {
	c.id++
	if err := c.conn.WriteJSON(map[string]any{"id": c.id, "method": method, "params": params}); err != nil {
		return err
	}
	c.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := c.conn.ReadJSON(&msg); err != nil {
			return err
		}
		if msg.ID != c.id {
			continue // an event
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		if result != nil {
			return json.Unmarshal(msg.Result, result)
		}
		return nil
	}
}

// eval evaluates a JavaScript expression and returns its value as a string.
func (c *cdp) eval(expr string) (string, error) {
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
	}
	if err := c.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return "", err
	}
	return fmt.Sprint(r.Result.Value), nil
}

// evalAwait evaluates a JavaScript expression that yields a promise and
// returns the promise's value as a string.
func (c *cdp) evalAwait(expr string) (string, error) {
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := c.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return "", err
	}
	if r.ExceptionDetails != nil {
		return "", fmt.Errorf("%s: %s", expr, r.ExceptionDetails.Text)
	}
	return fmt.Sprint(r.Result.Value), nil
}

// startChromium runs headless Chromium on url with its own profile and a
// DevTools port on 127.0.0.1, and connects to the page; flags are added to
// Chromium's command line.
func startChromium(t *testing.T, url string, flags ...string) *cdp {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("headless Chromium is required (%v): run `bash scripts/deps.sh`", err)
	}
	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	cmd := exec.CommandContext(ctx, chromiumPath, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+profile, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		"--window-size=1280,1000")
	cmd.Args = append(append(cmd.Args, flags...), url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
		cmd.Wait()
		cancel()
	})
	// Chromium writes the port it picked into DevToolsActivePort.
	var port string
	deadline := time.Now().Add(30 * time.Second)
	for port == "" {
		if data, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort")); err == nil {
			if lines := strings.Split(string(data), "\n"); len(lines) >= 2 && lines[0] != "" {
				port = lines[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Chromium wrote no DevTools port within 30 s; stderr:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var pageWS string
	for pageWS == "" {
		resp, err := http.Get("http://127.0.0.1:" + port + "/json/list")
		if err == nil {
			var targets []struct{ Type, URL, WebSocketDebuggerURL string }
			json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
			for _, tg := range targets {
				if tg.Type == "page" && strings.HasPrefix(tg.URL, url) {
					pageWS = tg.WebSocketDebuggerURL
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no page target for %s", url)
		}
		time.Sleep(100 * time.Millisecond)
	}
	conn, _, err := websocket.DefaultDialer.Dial(pageWS, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &cdp{conn: conn}
}

// waitEval polls a JavaScript expression until it returns want.
func waitEval(t *testing.T, c *cdp, expr, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var got string
	var err error
	for time.Now().Before(deadline) {
		if got, err = c.eval(expr); err == nil && got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s = %q (err %v), want %q within %v", expr, got, err, want, within)
}

// TestPageInChromium loads the page in headless Chromium: images load and
// refresh as frames arrive, and a zone's outline turns red when it goes
// critical, with the event listed and the zone table showing its level
// and fused OOD fraction. The screenshot is kept in
// $DIDOEDGE_SCREENSHOT_DIR when set.
func TestPageInChromium(t *testing.T) {
	f := newFake(320, 96)
	f.frame(1)
	base := startServer(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // a 10 fps camera
		for seq := uint64(2); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
				f.frame(seq)
			}
		}
	}()
	c := startChromium(t, base+"/")
	if err := c.call("Runtime.enable", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	// Every view's image decoded (naturalWidth > 0).
	waitEval(t, c, `["frame","depth","aleatoric","epistemic"].every(v => document.getElementById("img-"+v).naturalWidth === 320)`, "true", 20*time.Second)
	first, err := c.eval(`document.getElementById("img-frame").src`)
	if err != nil {
		t.Fatal(err)
	}
	waitEval(t, c, fmt.Sprintf(`document.getElementById("img-frame").src !== %q`, first), "true", 10*time.Second)
	// The fake's cameras have no domain monitor (TestDomainLineInChromium
	// has one).
	waitEval(t, c, `document.getElementById("domain").textContent`, "domain monitor off", 5*time.Second)
	waitEval(t, c, `document.querySelector('polygon[data-zone="r0c0"]').dataset.level`, "ok", 5*time.Second)
	waitEval(t, c, `getComputedStyle(document.querySelector('polygon[data-zone="r0c0"]')).stroke`, "rgb(51, 204, 51)", 5*time.Second)

	f.setLevel(0, alerts.LevelCritical) // the camera shows something the model never saw
	waitEval(t, c, `document.querySelector('polygon[data-zone="r0c0"]').dataset.level`, "critical", 5*time.Second)
	waitEval(t, c, `getComputedStyle(document.querySelector('polygon[data-zone="r0c0"]')).stroke`, "rgb(255, 34, 34)", 5*time.Second)
	waitEval(t, c, `getComputedStyle(document.querySelector('polygon[data-zone="r0c1"]')).stroke`, "rgb(51, 204, 51)", 5*time.Second)
	waitEval(t, c, `document.querySelector("#events tr").className + " " + document.querySelector("#events tr td:nth-child(4)").textContent`, "critical r0c0", 5*time.Second)
	// The zone table shows the level and the fused OOD fraction (0.25 in the fake).
	waitEval(t, c, `Array.from(document.querySelectorAll('#zones tr[data-zone="r0c0"] td')).slice(1, 3).map(td => td.textContent).join(" ")`, "critical 0.250", 5*time.Second)

	// The grid shows every camera; choosing one switches the views.
	f.addRear(160, 48)
	waitEval(t, c, `Array.from(document.querySelectorAll("#cameras .tile")).map(b => b.dataset.camera + ":" + b.dataset.level).join(" ")`,
		"front:critical rear:critical", 5*time.Second)
	waitEval(t, c, `document.querySelector("#cameras .tile.selected").dataset.camera`, "front", 5*time.Second)
	if _, err := c.eval(`document.querySelector('#cameras .tile[data-camera="rear"]').click()`); err != nil {
		t.Fatal(err)
	}
	waitEval(t, c, `document.getElementById("img-frame").naturalWidth + " " + document.getElementById("camera-select").value`, "160 rear", 10*time.Second)
	waitEval(t, c, `document.querySelectorAll("polygon[data-zone]").length / 4`, "1", 5*time.Second)
	waitEval(t, c, `document.querySelectorAll("#events tr").length`, "0", 5*time.Second) // front's event is not rear's

	var shot struct {
		Data string `json:"data"`
	}
	if err := c.call("Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || len(png) < 1000 {
		t.Fatalf("screenshot: %d bytes, %v", len(png), err)
	}
	if dir := os.Getenv("DIDOEDGE_SCREENSHOT_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "debugpage.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
