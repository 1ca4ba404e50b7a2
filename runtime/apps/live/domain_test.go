package live

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/didoedge/didoedge/alerts/schema"
	"github.com/didoedge/didoedge/runtime/domain"
	"github.com/didoedge/didoedge/runtime/infer"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// withRandomDomainRecord gives the test AuxUE a k-NN training-domain
// record fitted on 40 frames of statistics N(100, 1): the test frames'
// statistics (band means and log spreads of a few units) lie about 100
// standard deviations from them, so the monitor is shifted from the first
// frame on.
func withRandomDomainRecord(t testing.TB, rec **domain.Record) func(*runconfig.Config) {
	return func(cfg *runconfig.Config) {
		l := infer.DomainLayout(*cfg.AuxUE.IO)
		rng := rand.New(rand.NewPCG(5, 5))
		frames := make([][]float64, 40)
		for i := range frames {
			frames[i] = make([]float64, l.Dim())
			for j := range frames[i] {
				frames[i][j] = 100 + rng.NormFloat64()
			}
		}
		r, err := domain.Fit(l, frames, domain.FitOptions{Statistic: domain.KNN, Source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		io := *cfg.AuxUE.IO
		io.AuxUE = &infer.AuxUEInfo{Domain: r}
		cfg.AuxUE.IO = &io
		*rec = r
	}
}

// TestFoxgloveDomainChannel: with a training-domain record each camera
// gets a /<camera>/domain channel (didoedge.domain/1) that Foxglove's
// client (@foxglove/ws-protocol) receives every frame: the threshold is
// the record's at the default false_alarm_rate 0.01 (no calibration sets
// one), the window the default 1 s, the frame on these foreign frames
// shifted (smoothed distance above the threshold), and the values equal
// the pipeline's own status; every message validates against the
// channel's JSON Schema (alerts/schema's validator, types and ranges).
func TestFoxgloveDomainChannel(t *testing.T) {
	var rec *domain.Record
	r := startRigWith(t, twoCameras, 10, withRandomDomainRecord(t, &rec))
	waitFrames(t, r, 5)
	thr, err := rec.Threshold(0.01)
	if err != nil {
		t.Fatal(err)
	}
	rep := foxglove(t, "ws://"+r.srv.Addr()+"/", "--seconds", "3", "--topics", "^/(front|left)/domain$")
	if len(rep.Errors) > 0 {
		t.Fatalf("client errors: %v", rep.Errors)
	}
	raw, err := schemaFiles.ReadFile("schemas/domain.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Compile(raw)
	if err != nil {
		t.Fatalf("domain.v1.json: %v", err)
	}
	for _, cam := range []string{"front", "left"} {
		topic := "/" + cam + "/domain"
		if ch, ok := rep.Channels[topic]; !ok || ch.SchemaName != DomainSchema || ch.Encoding != "json" {
			t.Fatalf("%s: channel %+v, want %s in json", topic, ch, DomainSchema)
		}
		if rep.Counts[topic] < 10 || rep.JSONChecks[topic] != "ok" {
			t.Errorf("%s: %d messages in 3 s at 10 fps, schema check %q", topic, rep.Counts[topic], rep.JSONChecks[topic])
		}
		for _, k := range []string{topic, topic + "#last"} {
			msg := rep.Decoded[k]
			b, _ := json.Marshal(msg)
			if err := sch.Validate(b); err != nil {
				t.Errorf("%s: %s does not validate: %v", k, b, err)
			}
			d, s := msg["distance"].(float64), msg["smoothed"].(float64)
			if msg["camera"] != cam || msg["threshold"] != thr || msg["window_s"] != 1.0 || msg["shifted"] != true ||
				!(s > thr) || !(d > 0) || d >= math.MaxFloat32 {
				t.Errorf("%s = %v; want camera %s, threshold %v (the record's at 1 %%), window 1 s, shifted with smoothed > threshold",
					k, msg, cam, thr)
			}
		}
		var st struct {
			Threshold, WindowS float64
			Shifted            bool
			Shifts             uint64
		}
		for i, name := range r.p.Cameras() { // the pipeline's own view
			if name == cam {
				d := r.p.Metrics().Camera(i).Domain()
				st.Threshold, st.WindowS, st.Shifted, st.Shifts = d.Threshold, d.WindowS, d.Shifted, d.Shifts
			}
		}
		if st.Threshold != thr || st.WindowS != 1 || !st.Shifted || st.Shifts != 1 {
			t.Errorf("%s: pipeline status %+v, want the channel's threshold %v, one shift", cam, st, thr)
		}
	}
}
