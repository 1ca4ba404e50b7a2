package live

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/service/control"
)

// TestFoxgloveClient connects Foxglove's own client library
// (@foxglove/ws-protocol) to a running two-camera pipeline: the server
// info, the channels of both cameras with Foxglove's schema names, images
// and maps decoded from the advertised protobuf descriptors at the
// model's size, annotations and zone risk coloured and valued as the
// calibrations dictate (front alarms on every pixel: K/S > 1e-6; left
// never: K/S <= 1 = tau_e), events, and parameters: an invalid value is
// refused with a message naming the key and changes nothing, a valid one
// is applied through the pipeline's reload and takes effect (front's
// tau_e = 1: no pixel is out of distribution any more).
func TestFoxgloveClient(t *testing.T) {
	r := startRig(t, twoCameras, 10)
	url := "ws://" + r.srv.Addr() + "/"
	waitFrames(t, r, 5)
	rep := foxglove(t, url, "--seconds", "5", "--get")
	if len(rep.Errors) > 0 {
		t.Fatalf("client errors: %v", rep.Errors)
	}
	if rep.ServerInfo.Name != "didoedge" || !slices.Contains(rep.ServerInfo.Capabilities, "parameters") || rep.ServerInfo.Metadata["control"] != "true" {
		t.Fatalf("serverInfo %+v", rep.ServerInfo)
	}
	want := map[string]string{
		"image": "foxglove.CompressedImage", "depth": "foxglove.RawImage", "laplace_scale": "foxglove.RawImage",
		"epistemic": "foxglove.RawImage", "zone_annotations": "foxglove.ImageAnnotations", "zone_annotations_map": "foxglove.ImageAnnotations",
		"zone_risk": "didoedge.zone_risk/1", "events": "didoedge.event/1", "zone_states": "didoedge.state/1",
	}
	if len(rep.Channels) != 2*len(want) {
		t.Errorf("%d channels, want %d: %v", len(rep.Channels), 2*len(want), rep.Channels)
	}
	for _, cam := range []string{"front", "left"} {
		for stream, schema := range want {
			topic := "/" + cam + "/" + stream
			ch, ok := rep.Channels[topic]
			if !ok || ch.SchemaName != schema {
				t.Errorf("%s: channel %+v, want schema %s", topic, ch, schema)
			}
			if stream != "events" && stream != "zone_states" && rep.Counts[topic] == 0 {
				t.Errorf("%s: no message in 5 s", topic)
			}
		}
	}
	for topic, c := range rep.JSONChecks {
		if c != "ok" {
			t.Errorf("%s does not fit its JSON Schema: %s", topic, c)
		}
	}
	for _, topic := range []string{"/front/zone_annotations", "/left/zone_annotations_map"} {
		if rep.SchemaChecks[topic] != "ok" {
			t.Errorf("%s: annotation schema %q (want @foxglove/schemas' own)", topic, rep.SchemaChecks[topic])
		}
	}
	// Maps at the model's 64x32, float32 little-endian rows.
	for _, topic := range []string{"/front/depth", "/front/laplace_scale", "/left/epistemic"} {
		d := rep.Decoded[topic]
		if d["width"] != 64.0 || d["height"] != 32.0 || d["encoding"] != "32FC1" || d["step"] != 256.0 ||
			d["data"].(map[string]any)["bytes"] != float64(4*64*32) || d["frame_id"] != strings.Split(topic, "/")[1] {
			t.Errorf("%s decoded as %v", topic, d)
		}
	}
	img := rep.Decoded["/front/image"]
	if head := img["data"].(map[string]any)["head"].([]any); img["format"] != "jpeg" || head[0] != 255.0 || head[1] != 216.0 {
		t.Errorf("/front/image decoded as %v (want a JPEG: ff d8)", img)
	}
	// Zones: front's grid 1x2 at the frame's 64x32, critical (red); left's
	// 1x3, ok (green).
	checkAnnotations(t, rep.Decoded["/front/zone_annotations#last"], 2, 64, 32, 0.9)
	checkAnnotations(t, rep.Decoded["/left/zone_annotations_map#last"], 3, 64, 32, 0.15)
	checkRisk(t, rep.Decoded["/front/zone_risk#last"], 1, "critical")
	checkRisk(t, rep.Decoded["/left/zone_risk#last"], 0, "ok")
	if len(rep.Parameters) != 2*2+2*2+2*3+8 { // per camera tau_e, tau_a; per zone both; 8 event keys
		t.Errorf("%d parameters: %v", len(rep.Parameters), rep.Parameters)
	}
	if v := param(rep.Parameters, "/front/zones/r0c0/tau_e"); v != 0.000001 {
		t.Errorf("/front/zones/r0c0/tau_e = %v, want alarm.yaml's 1e-6", v)
	}
	t.Logf("frame -> client latency (ms): %+v", rep.LatencyMS)

	// An invalid value: refused, named, nothing changes.
	bad := foxglove(t, url, "--seconds", "1.5", "--topics", "^$", "--set", "/front/tau_e=1.5")
	if len(bad.Statuses) == 0 || bad.Statuses[0].Level != 2 || !strings.Contains(bad.Statuses[0].Message, "thresholds.front.tau_e: 1.5 outside (0,1]") {
		t.Errorf("invalid tau_e: statuses %+v", bad.Statuses)
	}
	if v := param(bad.SetReply, "/front/tau_e"); v != 0.000001 {
		t.Errorf("after the refused change /front/tau_e = %v, want 1e-6", v)
	}
	reloads := r.p.Metrics().Reloads.Load()
	// A valid one: applied through the reload; front goes quiet.
	ok := foxglove(t, url, "--seconds", "4", "--topics", "^/front/(zone_risk|events)$", "--set", "/front/tau_e=1")
	if v := param(ok.SetReply, "/front/tau_e"); v != 1.0 || len(ok.Statuses) != 0 {
		t.Fatalf("setParameters /front/tau_e=1: reply %v, statuses %+v", ok.SetReply, ok.Statuses)
	}
	if got := r.p.Metrics().Reloads.Load(); got != reloads+1 {
		t.Errorf("reloads %d -> %d, want one more", reloads, got)
	}
	checkRisk(t, ok.Decoded["/front/zone_risk#last"], 0, "ok")
	if ev := ok.Decoded["/front/events#last"]; ev == nil || ev["type"] != "end" {
		t.Errorf("front's last event %v, want the end of its episode", ev)
	}
	if ps, _ := r.ctl.GetParameters([]string{"/front/tau_e"}); len(ps) != 1 || ps[0].Value != 1.0 {
		t.Errorf("control reads %v", ps)
	}
}

func param(ps []control.Parameter, name string) any {
	for _, p := range ps {
		if p.Name == name {
			return p.Value
		}
	}
	return nil
}

func waitFrames(t *testing.T, r *rig, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for seen := 0; seen < n; {
		select {
		case <-r.frames:
			seen++
		case <-deadline:
			t.Fatalf("only %d frames within 30 s", seen)
		}
	}
}

// checkAnnotations: n zone polygons scaled to w x h, outline red r.
func checkAnnotations(t *testing.T, a map[string]any, n int, w, h float64, red float64) {
	t.Helper()
	if a == nil {
		t.Fatal("no annotations received")
	}
	pts := a["points"].([]any)
	if len(pts) != n || len(a["texts"].([]any)) != n {
		t.Fatalf("annotations %v: want %d zones", a, n)
	}
	for i, p := range pts {
		p := p.(map[string]any)
		if p["type"] != 2.0 || p["outline_color"].(map[string]any)["r"] != red {
			t.Errorf("zone %d: %v, want a LINE_LOOP with red %v", i, p, red)
		}
		// Grid cell i of n: x from i*w/n to (i+1)*w/n, y from 0 to h.
		for _, q := range p["points"].([]any) {
			q := q.(map[string]any)
			x, y := q["x"].(float64), q["y"].(float64)
			if x < float64(i)*w/float64(n)-1e-9 || x > float64(i+1)*w/float64(n)+1e-9 || (y != 0 && y != h) {
				t.Errorf("zone %d: point (%v, %v) outside its cell of %vx%v", i, x, y, w, h)
			}
		}
	}
}

func checkRisk(t *testing.T, r map[string]any, ood float64, level string) {
	t.Helper()
	if r == nil {
		t.Fatal("no zone_risk received")
	}
	for _, z := range r["zones"].([]any) {
		z := z.(map[string]any)
		if z["ood_fraction"] != ood || z["level"] != level {
			t.Errorf("%s zone %v: want ood_fraction %v, level %s", r["camera"], z, ood, level)
		}
	}
}
