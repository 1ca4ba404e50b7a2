package stream

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/internal/testnet"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// queuedLog keeps every event the pipeline queued (Options.OnEvent).
type queuedLog struct {
	mu     sync.Mutex
	events []alerts.Event
}

func (l *queuedLog) add(ev *alerts.Event) {
	l.mu.Lock()
	l.events = append(l.events, *ev)
	l.mu.Unlock()
}

func (l *queuedLog) snapshot() []alerts.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]alerts.Event(nil), l.events...)
}

// count returns how many events of type typ each camera queued.
func (l *queuedLog) count(typ alerts.EventType) map[string]int {
	out := map[string]int{}
	for _, ev := range l.snapshot() {
		if ev.Type == typ {
			out[ev.Camera]++
		}
	}
	return out
}

// cameraState is what a reload may change on one camera, as every reader
// sees it: the engine's zones and open episodes, the stored spec, the
// debug page's zones.
type cameraState struct {
	zones, episodes, specZones, pageZones string
	calibration                           string
}

func stateOf(p *Pipeline) map[string]cameraState {
	out := map[string]cameraState{}
	for _, c := range p.cams {
		var st cameraState
		var zs, eps []string
		for _, z := range p.CameraZoneStatus(c.spec.Name) {
			zs = append(zs, z.Name)
			eps = append(eps, z.Episode)
		}
		st.zones, st.episodes = strings.Join(zs, ","), strings.Join(eps, ",")
		p.ViewCamera(c.spec.Name, func(s *Snapshot) {
			var n []string
			for _, z := range s.Zones {
				n = append(n, z.Name)
			}
			st.pageZones = strings.Join(n, ",")
		})
		st.specZones = fmt.Sprint(len(c.spec.Alerts.Zones), c.spec.Alerts.Grid)
		st.calibration = filepath.Base(c.spec.Alerts.Calibration)
		out[c.spec.Name] = st
	}
	return out
}

// allAlarm: three cameras on the alarm calibration (every zone critical
// at once) with the alerts section's zones, except where a test edits one.
const allAlarm = `  - {name: front, url: "rtsp://127.0.0.1:1/front", calibration: alarm.yaml}
  - {name: left, url: "rtsp://127.0.0.1:1/left", calibration: alarm.yaml}
  - {name: right, url: "rtsp://127.0.0.1:1/right", calibration: alarm.yaml}
`

// TestReloadValidationFailureChangesNothing: camera 2 of 3 gets a zone
// that does not validate while cameras 1 and 3 get new zones and
// calibrations in the same file. The reload (SIGHUP's Reload, and Apply
// with the parsed config, the control API's entry point) is refused with
// the key of camera 2's error, and nothing changes on any camera: zones,
// open episodes (no end event queued), stored spec, debug page zones,
// Config() and the reload counter. The corrected file applies to all three.
func TestReloadValidationFailureChangesNothing(t *testing.T) {
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	path := multiConfig(t, s.dir, allAlarm, "quiet.yaml", testmodels.ConfigZones)
	var log queuedLog
	p, _, stop := startCameras(t, path, 20, log.add)
	waitFor(t, 30*time.Second, "two critical episodes on every camera", func() bool {
		c := log.count(alerts.EventNew)
		return c["front"] == 2 && c["left"] == 2 && c["right"] == 2
	})
	before, cfgBefore := stateOf(p), p.Config()
	for name, st := range before {
		if st.zones != "r0c0,r0c1" || st.pageZones != st.zones || strings.Contains(","+st.episodes+",", ",,") {
			t.Fatalf("%s before the reload: %+v", name, st)
		}
	}
	broken := `  - {name: front, url: "rtsp://127.0.0.1:1/front", calibration: quiet.yaml, grid: {rows: 1, cols: 3}}
  - {name: left, url: "rtsp://127.0.0.1:1/left", calibration: alarm.yaml, zones: [{name: bad, polygon: [[0, 0], [1, 0]]}]}
  - {name: right, url: "rtsp://127.0.0.1:1/right", calibration: quiet.yaml, grid: {rows: 1, cols: 3}}
`
	multiConfig(t, s.dir, broken, "quiet.yaml", testmodels.ConfigZones)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.Reload(ctx)
	testmodels.MustContain(t, err, "cameras[1].zones[0].polygon")
	// Apply with a configuration edited in memory, as a control API edits
	// a copy of Config(): Load never sees it, so the refusal is Apply's
	// own validation (Load of the broken file refuses it first: that
	// says nothing of Apply).
	if _, err := runconfig.Load(path); err == nil {
		t.Fatal("Load accepted the broken file")
	}
	edited := *p.Config()
	edited.Cameras = slices.Clone(edited.Cameras)
	edited.Cameras[1].ZoneSet = alerts.ZoneSet{Zones: []alerts.ZoneSpec{{Name: "bad", Polygon: [][2]float64{{0, 0}, {1, 0}}}}}
	err = p.Apply(ctx, &edited)
	testmodels.MustContain(t, err, "cameras[1].zones[0].polygon")
	time.Sleep(300 * time.Millisecond) // frames go on; nothing may change
	after := stateOf(p)
	for name, st := range before {
		if after[name] != st {
			t.Errorf("%s changed by a refused reload:\nbefore %+v\nafter  %+v", name, st, after[name])
		}
	}
	if n := log.count(alerts.EventEnd); len(n) != 0 {
		t.Errorf("a refused reload queued end events: %v", n)
	}
	if p.Config() != cfgBefore || p.Metrics().Reloads.Load() != 0 {
		t.Errorf("refused reload: Config() replaced %v, reloads %d", p.Config() != cfgBefore, p.Metrics().Reloads.Load())
	}

	fixed := strings.Replace(broken, "zones: [{name: bad, polygon: [[0, 0], [1, 0]]}]", "zones: [{name: near, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}]", 1)
	multiConfig(t, s.dir, fixed, "quiet.yaml", testmodels.ConfigZones)
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	after = stateOf(p)
	want := map[string][2]string{"front": {"r0c0,r0c1,r0c2", "quiet.yaml"}, "left": {"near", "alarm.yaml"}, "right": {"r0c0,r0c1,r0c2", "quiet.yaml"}}
	waitFor(t, 10*time.Second, "every camera's new zones after a frame", func() bool {
		after = stateOf(p)
		for name, w := range want {
			if st := after[name]; st.zones != w[0] || st.pageZones != w[0] || st.calibration != w[1] {
				return false
			}
		}
		return true
	})
	if ends := log.count(alerts.EventEnd); ends["front"] != 2 || ends["left"] != 2 || ends["right"] != 2 {
		t.Errorf("end events after the reload %v, want 2 per camera", ends)
	}
	if p.Config() == cfgBefore || p.Metrics().Reloads.Load() != 1 {
		t.Errorf("applied reload: Config() replaced %v, reloads %d", p.Config() != cfgBefore, p.Metrics().Reloads.Load())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// startMosquitto runs mosquitto on port (127.0.0.1) and returns a function
// that stops it by its PID.
func startMosquitto(t *testing.T, dir string, port int) func() {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		bin = "/usr/sbin/mosquitto"
	}
	conf := filepath.Join(dir, "mosquitto.conf")
	body := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n", port)
	if os.Geteuid() == 0 {
		body += "user root\n"
	}
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mosquitto (apt-get install mosquitto): %v", err)
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Cleanup(stop)
	testnet.WaitListening(t, port, 10*time.Second)
	return stop
}

// TestReloadRefusedWhenEndEventsCannotBeQueued: three cameras publish to
// an MQTT broker that is down, into an outbox of 16 records that holds
// their 12 new events (four critical zones each). A reload to three zones
// must end 12 episodes first; the outbox cannot take 12 more, so the
// reload is refused: nothing changes on any camera and no end event is
// queued. Once the broker is up and the outbox drained, the same reload
// applies to all three, with the 12 end events on consecutive seqs.
func TestReloadRefusedWhenEndEventsCannotBeQueued(t *testing.T) {
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	port := testnet.FreePort(t)
	write := func(zones string) string {
		path := multiConfig(t, s.dir, allAlarm, "quiet.yaml", zones)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(string(data), "broker: embedded", fmt.Sprintf("broker: \"tcp://127.0.0.1:%d\"", port), 1)
		text = strings.Replace(text, "  outbox: {dir: outbox}\n", "  outbox: {dir: outbox, max_records: 16}\n", 1)
		text = strings.Replace(text, "  embedded: {listen: \"127.0.0.1:0\", allow_anonymous: true}\n", "", 1)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	path := write("  grid: {rows: 1, cols: 4}")
	var log queuedLog
	p, _, stop := startCameras(t, path, 20, log.add)
	waitFor(t, 30*time.Second, "four critical episodes on every camera", func() bool {
		c := log.count(alerts.EventNew)
		return c["front"] == 4 && c["left"] == 4 && c["right"] == 4
	})
	before, cfgBefore := stateOf(p), p.Config()
	write("  grid: {rows: 1, cols: 3}")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := p.Reload(ctx)
	testmodels.MustContain(t, err, "reload not applied", "12 end events", "outbox full")
	time.Sleep(300 * time.Millisecond)
	after := stateOf(p)
	for name, st := range before {
		if after[name] != st {
			t.Errorf("%s changed by a refused reload:\nbefore %+v\nafter  %+v", name, st, after[name])
		}
	}
	if n := log.count(alerts.EventEnd); len(n) != 0 {
		t.Errorf("a refused reload queued end events: %v", n)
	}
	if p.Config() != cfgBefore || p.Metrics().Reloads.Load() != 0 {
		t.Errorf("refused reload: Config() replaced %v, reloads %d", p.Config() != cfgBefore, p.Metrics().Reloads.Load())
	}

	startMosquitto(t, s.dir, port)
	waitFor(t, 30*time.Second, "the outbox drained", func() bool {
		return p.sink.svc.Publisher().Pending() == 0
	})
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	var ends []alerts.Event
	for _, ev := range log.snapshot() {
		if ev.Type == alerts.EventEnd {
			ends = append(ends, ev)
		}
	}
	if len(ends) != 12 {
		t.Fatalf("%d end events after the reload, want 12", len(ends))
	}
	for i, ev := range ends {
		if ev.Seq != ends[0].Seq+uint64(i) {
			t.Fatalf("end event seqs not consecutive: %d at %d after %d", ev.Seq, i, ends[0].Seq)
		}
	}
	waitFor(t, 10*time.Second, "every camera's three zones", func() bool {
		for _, st := range stateOf(p) {
			if st.zones != "r0c0,r0c1,r0c2" || st.pageZones != st.zones {
				return false
			}
		}
		return true
	})
	if p.Metrics().Reloads.Load() != 1 {
		t.Errorf("reloads %d, want 1", p.Metrics().Reloads.Load())
	}
	// The new zones' episodes open; their end events at shutdown need
	// room in the outbox (16 records): wait until the broker took them.
	waitFor(t, 30*time.Second, "the new episodes delivered", func() bool {
		return len(log.count(alerts.EventNew)) == 3 && log.count(alerts.EventNew)["front"] == 7 && p.sink.svc.Publisher().Pending() == 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
