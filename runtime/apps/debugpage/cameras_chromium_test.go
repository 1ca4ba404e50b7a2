package debugpage

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/service/control"
)

// TestPageAddsAndRemovesCameraInChromium: the page's camera form drives
// the control API of a running pipeline (test models, a synthetic front
// camera) in headless Chromium. An invalid source is refused with the
// API's message naming the key (nothing changes); an image directory
// adds camera rear, whose tile appears and whose frames the page shows;
// "remove" takes the selected camera away again. Requests from another
// origin, or a POST that is not JSON, are refused before the API.
func TestPageAddsAndRemovesCameraInChromium(t *testing.T) {
	dir := t.TempDir()
	cfg := testRuntime(t, dir, 1, 2, "", "http: {listen: \"127.0.0.1:0\", max_fps: 10}\n")
	frames := writeFrames(t, filepath.Join(dir, "rear-frames"))
	ctx, p, mb := startPipeline(t, cfg)
	feedFrames(ctx, mb, 64, 32, 7, 100*time.Millisecond) // a 10 fps front camera
	srv, err := Start(ctx, "127.0.0.1:0", p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := "http://" + srv.Addr()
	// Without a control attached the form gets a clear 503.
	resp, body := post(t, base+"/api/cameras", `{"name": "rear"}`, "application/json", "")
	if resp.StatusCode != 503 || !strings.Contains(body, "control API is off") {
		t.Fatalf("POST without a control: %d %s", resp.StatusCode, body)
	}
	srv.AttachControl(control.NewControl(p, cfg, true, nil))
	for _, c := range []struct {
		ctype, origin string
		code          int
	}{{"application/json", "http://evil.example", 403}, {"text/plain", "", 415}} {
		if resp, body := post(t, base+"/api/cameras", `{"name": "rear", "sequence": {"dir": "`+frames+`"}}`, c.ctype, c.origin); resp.StatusCode != c.code {
			t.Fatalf("POST %s from %q: %d %s, want %d", c.ctype, c.origin, resp.StatusCode, body, c.code)
		}
	}

	c := startChromium(t, base+"/")
	waitEval(t, c, `Array.from(document.querySelectorAll("#cameras .tile")).map(b => b.dataset.camera).join(" ")`, "front", 20*time.Second)
	form := func(name, source string) {
		t.Helper()
		if _, err := c.eval(fmt.Sprintf(`document.getElementById("cam-name").value = %q; document.getElementById("cam-source").value = %q; document.getElementById("cam-add").click()`, name, source)); err != nil {
			t.Fatal(err)
		}
	}
	form("rear", "http://127.0.0.1/rear")
	waitEval(t, c, `document.getElementById("cam-msg").textContent.split(":").slice(0, 2).join(":")`, "422: cameras[1].url", 10*time.Second)
	if got := strings.Join(p.Cameras(), ","); got != "front" {
		t.Fatalf("cameras after a refused add: %s", got)
	}
	form("rear", frames)
	waitEval(t, c, `document.getElementById("cam-msg").textContent`, "added rear", 10*time.Second)
	waitEval(t, c, `Array.from(document.querySelectorAll("#cameras .tile")).map(b => b.dataset.camera).join(" ")`, "front rear", 10*time.Second)
	waitEval(t, c, `document.querySelector("#cameras .tile.selected").dataset.camera + " " + document.getElementById("camera-select").value`, "rear rear", 10*time.Second)
	waitEval(t, c, `document.getElementById("img-frame").src.includes("camera=rear") && document.getElementById("img-frame").naturalWidth === 64`, "true", 10*time.Second)
	if got := strings.Join(p.Cameras(), ","); got != "front,rear" {
		t.Fatalf("cameras after the add: %s", got)
	}
	if _, err := c.eval(`document.getElementById("cam-remove").click()`); err != nil {
		t.Fatal(err)
	}
	waitEval(t, c, `document.getElementById("cam-msg").textContent`, "removed rear", 10*time.Second)
	waitEval(t, c, `Array.from(document.querySelectorAll("#cameras .tile")).map(b => b.dataset.camera).join(" ")`, "front", 10*time.Second)
	waitEval(t, c, `document.querySelector("#cameras .tile.selected").dataset.camera`, "front", 10*time.Second)
	if got := strings.Join(p.Cameras(), ","); got != "front" {
		t.Fatalf("cameras after the removal: %s", got)
	}
	// The last camera stays: the API's 409 is shown.
	if _, err := c.eval(`document.getElementById("cam-remove").click()`); err != nil {
		t.Fatal(err)
	}
	waitEval(t, c, `document.getElementById("cam-msg").textContent.startsWith("409: ")`, "true", 10*time.Second)
}

// writeFrames writes three 64x32 PNG frames (an image sequence camera)
// into dir and returns it.
func writeFrames(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		img := image.NewRGBA(image.Rect(0, 0, 64, 32))
		for y := range 32 {
			for x := range 64 {
				img.Set(x, y, color.RGBA{uint8(x * 4), uint8(y*8 + i*20), 90, 255})
			}
		}
		var buf bytes.Buffer
		png.Encode(&buf, img)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d.png", i)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// post sends body with a content type and an Origin (when set).
func post(t *testing.T, url, body, ctype, origin string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("X-Didoedge-Request", "1")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp, b.String()
}
