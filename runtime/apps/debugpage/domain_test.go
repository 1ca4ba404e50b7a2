package debugpage

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/didoedge/didoedge/runtime/domain"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// TestDomainLineInChromium: a running pipeline (test models, 20 fps
// synthetic camera) whose AuxUE has a training-domain record fitted on
// statistics N(100, 1), about 100 standard deviations from the test
// frames': /api/state's domain field reports the shift with the record's
// threshold at the default false-alarm rate and the 1 s window, the
// camera's tile is marked, and the page's domain line in headless
// Chromium reads "DOMAIN SHIFT: ..." in red, then, after domain.persistence
// (2 s), names the remedy. A reload that raises domain.threshold to 1e6
// ends the shift: the field, the tile and the line follow.
func TestDomainLineInChromium(t *testing.T) {
	cfg := testRuntime(t, t.TempDir(), 1, 2, "", "http: {listen: \"127.0.0.1:0\", max_fps: 10}\ndomain: {persistence: 2s}\n")
	l := infer.DomainLayout(*cfg.AuxUE.IO)
	rng := rand.New(rand.NewPCG(9, 9))
	frames := make([][]float64, 40)
	for i := range frames {
		frames[i] = make([]float64, l.Dim())
		for j := range frames[i] {
			frames[i][j] = 100 + rng.NormFloat64()
		}
	}
	rec, err := domain.Fit(l, frames, domain.FitOptions{Statistic: domain.KNN, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	io := *cfg.AuxUE.IO
	io.AuxUE = &infer.AuxUEInfo{Domain: rec}
	cfg.AuxUE.IO = &io
	thr, err := rec.Threshold(0.01)
	if err != nil {
		t.Fatal(err)
	}

	ctx, p, mb := startPipeline(t, cfg)
	feedFrames(ctx, mb, 64, 32, 1, 50*time.Millisecond)
	base := startServer(t, p)
	state := func() State {
		t.Helper()
		var st State
		_, body := get(t, base+"/api/state")
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitState := func(what string, ok func(State) bool) State {
		t.Helper()
		var st State
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if st = state(); ok(st) {
				return st
			}
		}
		t.Fatalf("%s: /api/state %+v", what, st)
		return st
	}
	st := waitState("shifted", func(s State) bool { return s.Domain.Shifted })
	if d := st.Domain; !d.On || d.Threshold != thr || d.WindowS != 1 || !(d.Smoothed > thr) || d.Shifts != 1 ||
		len(st.Cameras) != 1 || !st.Cameras[0].DomainShift {
		t.Fatalf("/api/state while shifted: domain %+v, tiles %+v; want on, threshold %v (the record's at 1 %%), window 1 s", d, st.Cameras, thr)
	}

	c := startChromium(t, base+"/")
	if err := c.call("Runtime.enable", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	// The smoothed distance changes every frame: the line is compared with
	// it replaced by D.
	line := `document.getElementById("domain").textContent.replace(/^(DOMAIN SHIFT: frames unlike the training domain, |domain )[0-9.]+ \//, "$1D /")`
	shifted := fmt.Sprintf("DOMAIN SHIFT: frames unlike the training domain, D / %.2f over 1 s", thr)
	waitEval(t, c, line, shifted+" (lasting: train the AuxUE on this camera's data)", 10*time.Second)
	waitEval(t, c, `document.getElementById("domain").style.color`, "rgb(204, 0, 0)", 5*time.Second)
	waitEval(t, c, `document.querySelector("#cameras .tile span").textContent.endsWith(", DOMAIN SHIFT")`, "true", 5*time.Second)
	if d := state().Domain; !d.Persistent || d.SinceMS == 0 {
		t.Errorf("after persistence: domain %+v, want persistent", d)
	}

	next := *p.Config()
	next.Domain.Threshold = runconfig.DomainThreshold{Value: 1e6}
	if err := p.Apply(ctx, &next); err != nil {
		t.Fatal(err)
	}
	st = waitState("the shift ended by the reload", func(s State) bool { return !s.Domain.Shifted })
	if d := st.Domain; d.Threshold != 1e6 || d.Persistent || st.Cameras[0].DomainShift {
		t.Errorf("/api/state after the reload: domain %+v, tiles %+v", d, st.Cameras)
	}
	waitEval(t, c, line, "domain D / 1000000.00 over 1 s", 10*time.Second)
	waitEval(t, c, `document.getElementById("domain").style.color + "|" + document.querySelector("#cameras .tile span").textContent.includes("DOMAIN")`,
		"|false", 5*time.Second)
}
