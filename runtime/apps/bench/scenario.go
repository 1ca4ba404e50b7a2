package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

// ScriptSegment is one ground-truth segment of a scripted drive.
type ScriptSegment struct {
	Kind  string // KindClear, KindFog, ...
	Phase simrig.Phase
}

// OODPhase returns the simulated camera phase of an out-of-distribution
// segment kind: heavy fog (extinction 0.12/m), sensor noise (gaussian
// noise, severity 3), night (the dark corruption, severity 4), the indoor
// world, obstacles on the ego lane (crates, fallen trees), the new camera
// (sim.CameraNewCam: the same roads through another lens, colour response
// and sensor, at the stream's size). "noise:5" or
// "night:3" choose another severity (1..5); the kind keeps the suffix.
func OODPhase(kind string, d time.Duration) (simrig.Phase, error) {
	p := simrig.Phase{Name: kind, World: sim.WorldOutdoor, Duration: d}
	base, sev, hasSev := strings.Cut(kind, ":")
	severity := 0
	if hasSev {
		n, err := strconv.Atoi(sev)
		if err != nil || (base != KindNoise && base != KindNight) {
			return p, fmt.Errorf("segment kind %q: only noise:N and night:N take a severity", kind)
		}
		severity = n
	}
	pick := func(def int) int {
		if severity != 0 {
			return severity
		}
		return def
	}
	switch base {
	case KindFog:
		p.Fog = 0.12
	case KindNoise:
		p.Corruption, p.Severity = "gaussian_noise", pick(3)
	case KindNight:
		p.Corruption, p.Severity = "dark", pick(4)
	case KindIndoor:
		p.World = sim.WorldIndoor
	case KindObstacle:
		p.Obstacles = true
	case KindNewCam:
		p.Camera = sim.CameraNewCam
	case KindClear:
	default:
		return p, fmt.Errorf("unknown segment kind %q (fog, noise, night, indoor, obstacle, newcam)", kind)
	}
	if p.Corruption != "" && (p.Severity < 1 || p.Severity > 5) {
		return p, fmt.Errorf("segment kind %q: severity %d outside 1..5", kind, p.Severity)
	}
	return p, nil
}

// Script builds a drive: lead of clear driving, then reps rounds of every
// kind (each ood long, followed by gap of clear driving), then tail of
// clear driving (the long stretch for false episodes).
func Script(kinds []string, reps int, lead, ood, gap, tail time.Duration) ([]ScriptSegment, error) {
	clear := func(d time.Duration) ScriptSegment {
		return ScriptSegment{Kind: KindClear, Phase: simrig.Phase{Name: KindClear, World: sim.WorldOutdoor, Duration: d}}
	}
	s := []ScriptSegment{clear(lead)}
	for range reps {
		for _, k := range kinds {
			p, err := OODPhase(k, ood)
			if err != nil {
				return nil, err
			}
			s = append(s, ScriptSegment{Kind: k, Phase: p}, clear(gap))
		}
	}
	if tail > 0 {
		s[len(s)-1].Phase.Duration += tail
	}
	return s, nil
}

// DefaultKinds are the out-of-distribution segments of the benchmark.
var DefaultKinds = []string{KindFog, KindNoise, KindNight, KindIndoor, KindObstacle, KindNewCam}

// ScenarioOptions configure `didoedge bench scenario`.
type ScenarioOptions struct {
	Options
	// Out receives the report, the timeline, every MQTT message and the
	// per-frame zone metrics.
	Out    string
	Script []ScriptSegment
	// Timing of the engine (nil: alerts.DefaultTiming).
	Timing *alerts.Timing
	// Mosquitto is the broker binary (default: FindMosquitto).
	Mosquitto string
	// Grace: an episode starting this soon after an OOD segment ended is
	// that segment's (default 3 s); also the start-up time not counted.
	Grace time.Duration
	// Tune replays the recorded zone metrics with each of these timings.
	Tune []alerts.Timing
	// Progress, when set, gets a line per segment change.
	Progress func(string)
}

// ScenarioReport is the outcome of a scenario run.
type ScenarioReport struct {
	Analysis *Analysis
	Goals    []Goal
	Timing   alerts.Timing
	Frames   uint64  // assessed
	FPS      float64 // assessed per second
	Dropped  uint64
	Messages int // MQTT messages the subscriber recorded
	Duration time.Duration
	Tuning   []TuneResult
	// Signals are the raw zone metrics per segment kind (the aleatoric
	// criterion's behaviour among them).
	Signals []Signal
	// Events are the zone and fault events the subscriber received during
	// the drive; Snapshots the snapshot JPEGs (files in Out/snapshots).
	Events    []Received
	Snapshots []SnapshotFile
	// Domain is the domain monitor's camera-level domain_shift episodes
	// against the same segments (AnalyzeDomain), DomainGoals its targets.
	Domain      *Analysis
	DomainGoals []Goal
}

// frameMetrics is one assessed frame's zone metrics (frames.jsonl).
type frameMetrics struct {
	Seq       uint64    `json:"seq"`
	CaptureMS int64     `json:"capture_ms"`
	OOD       []float32 `json:"ood_fraction"`
	Alea      []float32 `json:"aleatoric_fraction"`
	Valid     []int     `json:"valid"`
	PessDepth []float32 `json:"pessimistic_depth_m"`
	// Timing: capture to the pipeline taking the frame, the models' run,
	// capture to the events queued (all in ms).
	CameraMS    float64 `json:"camera_ms"`
	InferenceMS float64 `json:"inference_ms"`
	DoneMS      float64 `json:"done_ms"`
	// Risks keep everything for the replay.
	risks   []alerts.ZoneRisk
	capture time.Time
}

// messageLog is the MQTT subscriber: it logs every message, and keeps
// the snapshot JPEGs it receives in snapDir (at most maxSnapshotFiles).
type messageLog struct {
	mu      sync.Mutex
	w       *bufio.Writer
	f       *os.File
	n       int
	events  []Received
	err     error
	snapDir string
	snaps   []SnapshotFile
}

// SnapshotFile is a snapshot JPEG the subscriber received.
type SnapshotFile struct {
	Topic, Path string
	At          time.Time
}

const maxSnapshotFiles = 500

func (r *messageLog) handle(_ mqtt.Client, m mqtt.Message) {
	at := time.Now()
	payload := m.Payload()
	line := map[string]any{"at_ms": at.UnixMilli(), "topic": m.Topic(), "retained": m.Retained(), "qos": m.Qos(), "bytes": len(payload)}
	if json.Valid(payload) && len(payload) > 0 {
		line["payload"] = json.RawMessage(payload)
	} else if len(payload) > 0 {
		sum := sha256.Sum256(payload)
		line["sha256"] = hex.EncodeToString(sum[:])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	b, err := json.Marshal(line)
	if err == nil {
		r.w.Write(b)
		err = r.w.WriteByte('\n')
	}
	if err != nil && r.err == nil {
		r.err = err
	}
	if strings.HasSuffix(m.Topic(), "/events") {
		var ev alerts.Event
		if json.Unmarshal(payload, &ev) == nil {
			r.events = append(r.events, Received{Event: ev, At: at})
		}
	}
	if strings.HasSuffix(m.Topic(), "/snapshot") && len(payload) > 0 && len(r.snaps) < maxSnapshotFiles && r.snapDir != "" {
		parts := strings.Split(m.Topic(), "/")
		path := filepath.Join(r.snapDir, fmt.Sprintf("%03d-%s.jpg", len(r.snaps), parts[len(parts)-2]))
		if err := os.WriteFile(path, payload, 0o644); err != nil && r.err == nil {
			r.err = err
		}
		r.snaps = append(r.snaps, SnapshotFile{Topic: m.Topic(), Path: path, At: at})
	}
}

// Scenario drives the simulated camera through the script over RTSP, runs
// the real pipeline (models, alerts, a mosquitto broker it starts), records
// every MQTT message with a subscriber, and compares the events with the
// ground-truth segments.
func Scenario(ctx context.Context, o ScenarioOptions) (*ScenarioReport, error) {
	o.defaults()
	if o.Grace == 0 {
		o.Grace = 3 * time.Second
	}
	if len(o.Script) == 0 {
		return nil, errors.New("bench scenario: empty script")
	}
	tm := alerts.DefaultTiming()
	if o.Timing != nil {
		tm = *o.Timing
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("bench scenario: %w", err)
	}
	work, err := os.MkdirTemp(o.Out, "work-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	bin := o.Mosquitto
	if bin == "" {
		if bin, err = FindMosquitto(); err != nil {
			return nil, err
		}
	}
	broker, err := StartMosquitto(ctx, bin, work)
	if err != nil {
		return nil, err
	}
	defer broker.Stop()

	var phases []simrig.Phase
	var total time.Duration
	for _, s := range o.Script {
		phases = append(phases, s.Phase)
		total += s.Phase.Duration
	}
	// A last phase that the run never reaches, so the script does not loop.
	phases = append(phases, simrig.Phase{Name: "after", World: sim.WorldOutdoor, Duration: time.Hour})
	do := demo.Options{ModelsDir: o.ModelsDir, WorkDir: work, MQTT: "tcp://" + broker.Addr, HTTP: runconfig.HTTPOff,
		FPS: o.FPS, Phases: phases, Logger: o.Log, Precompute: o.Precompute, Timing: &tm, Snapshots: true, HomeAssistant: true}
	cam, err := simrig.StartCamera(do.Rig(), o.Width, o.Height)
	if err != nil {
		return nil, err
	}
	defer cam.Server.Close()
	cfg, err := demo.Config(do, cam.URL)
	if err != nil {
		return nil, err
	}

	msgs, err := os.Create(filepath.Join(o.Out, "messages.jsonl"))
	if err != nil {
		return nil, err
	}
	defer msgs.Close()
	rec := &messageLog{f: msgs, w: bufio.NewWriterSize(msgs, 1<<20), snapDir: filepath.Join(o.Out, "snapshots")}
	if err := os.MkdirAll(rec.snapDir, 0o755); err != nil {
		return nil, err
	}
	sub := mqtt.NewClient(mqtt.NewClientOptions().AddBroker("tcp://" + broker.Addr).
		SetClientID("didoedge-bench-scenario-" + strconv.FormatInt(time.Now().UnixNano(), 36)).SetCleanSession(true).
		SetOrderMatters(false))
	if tok := sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("bench subscriber: connect: %v", tok.Error())
	}
	defer sub.Disconnect(250)
	for _, topic := range []string{cfg.AlertsConfig.TopicPrefix + "/#", cfg.AlertsConfig.HomeAssistant.Prefix + "/#"} {
		if tok := sub.Subscribe(topic, 1, rec.handle); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			return nil, fmt.Errorf("bench subscriber: subscribe %s: %v", topic, tok.Error())
		}
	}

	var fmu sync.Mutex
	var frames []frameMetrics
	onFrame := func(ft stream.FrameTiming) {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fr := frameMetrics{Seq: ft.Seq, CaptureMS: ft.Capture.UnixMilli(), capture: ft.Capture, risks: slices.Clone(ft.Risks),
			CameraMS: ms(ft.Start.Sub(ft.Capture)), InferenceMS: ms(ft.Inference), DoneMS: ms(ft.Done.Sub(ft.Capture))}
		for _, r := range ft.Risks {
			fr.OOD = append(fr.OOD, r.OODFraction)
			fr.Alea = append(fr.Alea, r.AleatoricFraction)
			fr.Valid = append(fr.Valid, r.Valid)
			fr.PessDepth = append(fr.PessDepth, r.PessimisticDepth)
		}
		fmu.Lock()
		frames = append(frames, fr)
		fmu.Unlock()
	}
	p, err := stream.New(ctx, cfg, stream.Options{Logger: o.Log, OnFrame: onFrame})
	if err != nil {
		return nil, err
	}
	spec, err := cfg.AlertsConfig.EngineSpec("alerts")
	if err != nil {
		p.Close()
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()

	// Wait for the script to play out, reporting segment changes.
	started := time.Now()
	var runEnd time.Time
	announced := 0
	for {
		sw := cam.Scenario.Switches()
		for ; announced < len(sw); announced++ {
			if ph := sw[announced].Phase; ph < len(o.Script) && o.Progress != nil {
				o.Progress(fmt.Sprintf("%s segment %d/%d: %s (%v)", sw[announced].At.Format("15:04:05.000"), ph+1, len(o.Script),
					o.Script[ph].Kind, o.Script[ph].Phase.Duration))
			}
		}
		if n := len(sw); n > 0 && sw[n-1].Phase == len(o.Script) {
			runEnd = sw[n-1].At
			break
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			stop()
			<-done
			return nil, err
		}
		if time.Since(started) > total+time.Minute {
			stop()
			<-done
			return nil, fmt.Errorf("bench scenario: the camera did not play the %v script in %v", total, time.Since(started).Round(time.Second))
		}
	}
	// Let the last episodes end and their events arrive.
	if err := sleep(ctx, o.Grace+time.Second); err != nil {
		stop()
		<-done
		return nil, err
	}
	m := p.Metrics().Camera(0)
	assessed, dropped := m.Frames.Load(), m.Dropped.Load()
	stop()
	if err := <-done; err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond) // the close's end events reach the subscriber
	sub.Disconnect(250)
	rec.mu.Lock()
	events, nmsgs, snaps := slices.Clone(rec.events), rec.n, slices.Clone(rec.snaps)
	werr := errors.Join(rec.err, rec.w.Flush())
	rec.mu.Unlock()
	if werr != nil {
		return nil, fmt.Errorf("bench scenario: messages.jsonl: %w", werr)
	}

	spans := spansOf(cam.Scenario.Switches(), o.Script, runEnd)
	zones := make([]string, len(spec.Zones))
	for i, z := range spec.Zones {
		zones[i] = z.Name
	}
	// Only what happened until the run's end counts (the shutdown ends
	// every open episode).
	var inRun []Received
	for _, r := range events {
		if time.UnixMilli(r.Event.TimeMS).Before(runEnd.Add(o.Grace)) {
			inRun = append(inRun, r)
		}
	}
	rep := &ScenarioReport{Timing: tm, Frames: assessed, Dropped: dropped, Messages: nmsgs, Duration: runEnd.Sub(spans[0].Start),
		Events: inRun, Snapshots: snaps}
	rep.FPS = float64(assessed) / time.Since(started).Seconds()
	rep.Analysis = Analyze(spans, zones, Episodes(inRun), o.Grace, runEnd.Add(o.Grace))
	rep.Goals = Goals(rep.Analysis)
	rep.Domain = AnalyzeDomain(spans, inRun, o.Grace, runEnd.Add(o.Grace))
	rep.DomainGoals = DomainGoals(rep.Domain, rep.Analysis)

	fmu.Lock()
	defer fmu.Unlock()
	fm := make([]FrameMetrics, len(frames))
	for i, f := range frames {
		fm[i] = FrameMetrics{Capture: f.capture, OOD: f.OOD, Alea: f.Alea}
	}
	aleaWarn := 0.0
	if c := spec.Calibration.Levels.AleatoricFraction; c != nil {
		aleaWarn = c.Warn.Enter
	}
	rep.Signals = SignalTable(fm, spans, zones, aleaWarn, inRun, 500*time.Millisecond)
	if err := writeFrames(filepath.Join(o.Out, "frames.jsonl"), frames); err != nil {
		return nil, err
	}
	for _, t := range o.Tune {
		tr, err := ReplayTiming(spec, frames, spans, zones, t, o.Grace, runEnd.Add(o.Grace))
		if err != nil {
			return nil, err
		}
		rep.Tuning = append(rep.Tuning, tr)
	}
	if err := rep.write(o.Out, inRun); err != nil {
		return nil, err
	}
	return rep, nil
}

// spansOf turns the camera's phase switches into ground-truth spans; the
// last script segment ends at runEnd.
//
// Times are truncated to milliseconds, the resolution of event times: the
// first frame of a segment has the segment's start as its capture time.
func spansOf(sw []simrig.Switch, script []ScriptSegment, runEnd time.Time) []Span {
	ms := func(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
	var spans []Span
	for i, s := range sw {
		if s.Phase >= len(script) {
			break
		}
		end := runEnd
		if i+1 < len(sw) {
			end = sw[i+1].At
		}
		spans = append(spans, Span{Kind: script[s.Phase].Kind, Start: ms(s.At), End: ms(end)})
	}
	return spans
}

// ReplayDir replays the recorded drive of a `bench scenario` output
// directory (frames.jsonl, report.json) with each timing, using the zones
// and calibration of spec, and writes tuning.md there.
func ReplayDir(dir string, spec alerts.EngineSpec, timings []alerts.Timing, grace time.Duration) ([]TuneResult, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	var rep jsonReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("replay: %s: %w", filepath.Join(dir, "report.json"), err)
	}
	var spans []Span
	for _, s := range rep.Segments {
		spans = append(spans, Span{Kind: s.Kind, Start: time.UnixMilli(s.StartMS), End: time.UnixMilli(s.EndMS)})
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("replay: %s has no segments", dir)
	}
	zones := make([]string, len(spec.Zones))
	for i, z := range spec.Zones {
		zones[i] = z.Name
	}
	frames, err := readFrames(filepath.Join(dir, "frames.jsonl"))
	if err != nil {
		return nil, err
	}
	for n := range frames {
		fr := &frames[n]
		if len(fr.OOD) != len(zones) || len(fr.Alea) != len(zones) || len(fr.Valid) != len(zones) || len(fr.PessDepth) != len(zones) {
			return nil, fmt.Errorf("replay: frames.jsonl record %d has metrics of %d zones, the config %d", n+1, len(fr.OOD), len(zones))
		}
		fr.capture = time.UnixMilli(fr.CaptureMS)
		for i, z := range zones {
			fr.risks = append(fr.risks, alerts.ZoneRisk{Zone: z, Pixels: fr.Valid[i], Valid: fr.Valid[i], OODFraction: fr.OOD[i],
				AleatoricFraction: fr.Alea[i], PessimisticDepth: fr.PessDepth[i], NearestDepth: fr.PessDepth[i]})
		}
	}
	runEnd := spans[len(spans)-1].End.Add(grace)
	var out []TuneResult
	for _, t := range timings {
		tr, err := ReplayTiming(spec, frames, spans, zones, t, grace, runEnd)
		if err != nil {
			return nil, err
		}
		out = append(out, tr)
	}
	t := "# Timings replayed over the recorded zone metrics\n\n" + tuningTable(rankTuning(out))
	if err := os.WriteFile(filepath.Join(dir, "tuning.md"), []byte(t), 0o644); err != nil {
		return nil, err
	}
	return out, nil
}

func writeFrames(path string, frames []frameMetrics) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, fr := range frames {
		if err := enc.Encode(fr); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TuneResult is one timing replayed over the recorded zone metrics.
type TuneResult struct {
	Timing   alerts.Timing
	Analysis *Analysis
	Goals    []Goal
}

// ReplayTiming runs the recorded zone metrics of a drive through a fresh engine
// with timing t (the zones and calibration of spec) and analyses the
// events it decides. Event times are frame times: no delivery latency.
func ReplayTiming(spec alerts.EngineSpec, frames []frameMetrics, spans []Span, zones []string, t alerts.Timing, grace time.Duration, runEnd time.Time) (TuneResult, error) {
	spec.Config.Timing = t
	spec.Config.StallAfter, spec.Config.StatsInterval = 0, 0
	var evs []Received
	sink := alerts.SinkFuncs{OnEvent: func(ev *alerts.Event) error {
		evs = append(evs, Received{Event: *ev, At: time.UnixMilli(ev.TimeMS)})
		return nil
	}}
	e, err := alerts.NewEngine(spec, sink)
	if err != nil {
		return TuneResult{}, err
	}
	for _, fr := range frames {
		if err := e.ObserveRisks(alerts.Frame{Seq: fr.Seq, Capture: fr.capture}, fr.risks); err != nil {
			return TuneResult{}, err
		}
	}
	a := Analyze(spans, zones, Episodes(evs), grace, runEnd)
	return TuneResult{Timing: t, Analysis: a, Goals: Goals(a)}, nil
}

// TuningGrid is the set of timings `bench scenario --tune` replays:
// fusion time constants, entry inertias for warn and for critical, exit
// inertias and merge windows, with a 1 s minimum episode (192 timings).
func TuningGrid() []alerts.Timing {
	var g []alerts.Timing
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, f := range []time.Duration{0, ms(50), ms(100), ms(200)} {
		for _, e := range []time.Duration{0, ms(140), ms(300)} {
			for _, c := range []time.Duration{0, ms(70)} {
				for _, x := range []time.Duration{0, ms(200)} {
					for _, m := range []time.Duration{ms(500), ms(1000), ms(1500), ms(2000)} {
						g = append(g, alerts.Timing{FusionTimeConstant: f, EnterInertia: e, CriticalEnterInertia: c, ExitInertia: x,
							MinEpisode: time.Second, MergeWindow: m})
					}
				}
			}
		}
	}
	return g
}

// Reanalyze rebuilds a `bench scenario` output directory's report from
// its recordings (report.json for the segments and run figures,
// messages.jsonl for the events, frames.jsonl for the signals), with
// grace and the aleatoric warn entry aleaWarn, and writes report.md,
// report.json and timeline.png again (tuning.md is --replay's).
func Reanalyze(dir string, grace time.Duration, aleaWarn float64) (*ScenarioReport, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, fmt.Errorf("reanalyze: %w", err)
	}
	var old jsonReport
	if err := json.Unmarshal(raw, &old); err != nil {
		return nil, fmt.Errorf("reanalyze: %s: %w", filepath.Join(dir, "report.json"), err)
	}
	rep := &ScenarioReport{Frames: old.Frames, FPS: old.FPS, Dropped: old.Dropped, Messages: old.Messages}
	for key, dst := range map[string]*time.Duration{"fusion_time_constant": &rep.Timing.FusionTimeConstant, "enter_inertia": &rep.Timing.EnterInertia,
		"critical_enter_inertia": &rep.Timing.CriticalEnterInertia, "exit_inertia": &rep.Timing.ExitInertia,
		"min_episode": &rep.Timing.MinEpisode, "merge_window": &rep.Timing.MergeWindow} {
		if v, ok := old.Timing[key]; ok {
			if *dst, err = time.ParseDuration(v); err != nil {
				return nil, fmt.Errorf("reanalyze: report.json timing.%s: %w", key, err)
			}
		}
	}
	var spans []Span
	for _, s := range old.Segments {
		spans = append(spans, Span{Kind: s.Kind, Start: time.UnixMilli(s.StartMS), End: time.UnixMilli(s.EndMS)})
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("reanalyze: %s has no segments", dir)
	}
	var zones []string
	for _, z := range old.Zones {
		if !slices.Contains(zones, z.Zone) {
			zones = append(zones, z.Zone)
		}
	}
	runEnd := spans[len(spans)-1].End
	events, err := readEvents(filepath.Join(dir, "messages.jsonl"))
	if err != nil {
		return nil, err
	}
	var inRun []Received
	for _, r := range events {
		if time.UnixMilli(r.Event.TimeMS).Before(runEnd.Add(grace)) {
			inRun = append(inRun, r)
		}
	}
	rep.Events = inRun
	rep.Duration = runEnd.Sub(spans[0].Start)
	rep.Analysis = Analyze(spans, zones, Episodes(inRun), grace, runEnd.Add(grace))
	rep.Goals = Goals(rep.Analysis)
	rep.Domain = AnalyzeDomain(spans, inRun, grace, runEnd.Add(grace))
	rep.DomainGoals = DomainGoals(rep.Domain, rep.Analysis)
	frames, err := readFrames(filepath.Join(dir, "frames.jsonl"))
	if err != nil {
		return nil, err
	}
	fm := make([]FrameMetrics, len(frames))
	for i, f := range frames {
		fm[i] = FrameMetrics{Capture: time.UnixMilli(f.CaptureMS), OOD: f.OOD, Alea: f.Alea}
	}
	rep.Signals = SignalTable(fm, spans, zones, aleaWarn, inRun, 500*time.Millisecond)
	if err := rep.write(dir, inRun); err != nil {
		return nil, err
	}
	return rep, nil
}

// readEvents reads the alert events of a messages.jsonl.
func readEvents(path string) ([]Received, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reanalyze: %w", err)
	}
	defer f.Close()
	var out []Received
	dec := json.NewDecoder(bufio.NewReader(f))
	for n := 1; ; n++ {
		var m struct {
			AtMS    int64           `json:"at_ms"`
			Topic   string          `json:"topic"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("reanalyze: %s record %d: %w", path, n, err)
		}
		if !strings.HasSuffix(m.Topic, "/events") {
			continue
		}
		var ev alerts.Event
		if err := json.Unmarshal(m.Payload, &ev); err != nil {
			return nil, fmt.Errorf("reanalyze: %s record %d: event: %w", path, n, err)
		}
		out = append(out, Received{Event: ev, At: time.UnixMilli(m.AtMS)})
	}
}

// readFrames reads a frames.jsonl.
func readFrames(path string) ([]frameMetrics, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	var frames []frameMetrics
	dec := json.NewDecoder(bufio.NewReader(f))
	for n := 1; ; n++ {
		var fr frameMetrics
		if err := dec.Decode(&fr); errors.Is(err, io.EOF) {
			return frames, nil
		} else if err != nil {
			return nil, fmt.Errorf("replay: %s record %d: %w", path, n, err)
		}
		fr.capture = time.UnixMilli(fr.CaptureMS)
		frames = append(frames, fr)
	}
}
