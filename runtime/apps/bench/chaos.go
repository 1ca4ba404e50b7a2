package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/didoedge/didoedge/alerts/outbox"
	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/runtime/apps/demo"
)

// ChaosOptions configure `didoedge bench chaos`.
type ChaosOptions struct {
	ModelsDir string
	// Out receives report.json, report.md and one directory per broker
	// (config, logs, the subscribers' records).
	Out string
	// Self is the didoedge binary run as the runtime (os.Executable).
	Self string
	// Brokers run in turn, each for Duration / len(Brokers):
	// "mosquitto" (external, started here) and "embedded".
	Brokers  []string
	Duration time.Duration
	// FaultEvery is the fault script's period (default 20 s).
	FaultEvery time.Duration
	// Warmup is discarded from the RSS and goroutine windows, from the
	// phase's start (default 60 s); RestartWarmup from every runtime
	// (re)start (default 30 s: the reference models' RSS settles in about
	// 25 s on the 2-core VM).
	Warmup, RestartWarmup time.Duration
	// Window is the RSS and goroutine comparison window (default 10 min
	// when a phase has at least 20 min after the warm-up, else a sixth of it).
	Window time.Duration
	// Sample is the RSS and goroutine sampling period (default 5 s).
	Sample      time.Duration
	Cameras     int     // simulated cameras (default 2)
	FPS         float64 // their frame rate (default 5)
	Seed        int64   // fault script seed (default 1)
	Subscribers int     // persistent subscribers (default 2)
	// TmpfsBytes is the size of the tmpfs the outbox lives on (default 8 MiB).
	TmpfsBytes int64
	// UpdateInterval is alerts.events.update_interval: open episodes
	// publish an update this often, a steady flow of events (default 2 s).
	UpdateInterval time.Duration
	Log            *slog.Logger
	Progress       io.Writer
}

func (o *ChaosOptions) defaults() {
	if len(o.Brokers) == 0 {
		o.Brokers = []string{"mosquitto", "embedded"}
	}
	if o.FaultEvery == 0 {
		o.FaultEvery = 20 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = time.Minute
	}
	if o.RestartWarmup == 0 {
		o.RestartWarmup = min(30*time.Second, o.Warmup)
	}
	if o.Sample == 0 {
		o.Sample = 5 * time.Second
	}
	if o.Cameras == 0 {
		o.Cameras = 2
	}
	if o.FPS == 0 {
		o.FPS = 5
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Subscribers == 0 {
		o.Subscribers = 2
	}
	if o.TmpfsBytes == 0 {
		o.TmpfsBytes = 8 << 20
	}
	if o.UpdateInterval == 0 {
		o.UpdateInterval = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// The fault kinds of the script.
const (
	FaultCamera = "camera_kill" // a camera's RTSP server closed, restarted after half a period
	FaultBroker = "broker_restart"
	FaultKill   = "runtime_sigkill"
	FaultReload = "sighup"
	FaultDisk   = "disk_full" // the outbox's tmpfs filled, freed after half a period
)

// FaultKinds are the script's kinds; each round runs all of them in an
// order drawn from the seed.
var FaultKinds = []string{FaultCamera, FaultBroker, FaultKill, FaultReload, FaultDisk}

// Fault is one entry of the script as it ran.
type Fault struct {
	AtSec  float64 `json:"at_s"`
	Kind   string  `json:"kind"`
	Detail string  `json:"detail,omitempty"`
	Error  string  `json:"error,omitempty"`
	// Skipped: the fault could not be injected here (disk_full without a
	// tmpfs); it is counted in PhaseReport.SkippedCounts, not FaultCounts.
	Skipped bool `json:"skipped,omitempty"`
}

// ChaosSample is one RSS and goroutine reading of the runtime.
type ChaosSample struct {
	AtSec float64 `json:"at_s"`
	PID   int     `json:"pid"`
	// SinceStartSec is the time since this runtime process started.
	SinceStartSec float64 `json:"since_start_s"`
	RSSBytes      int64   `json:"rss_bytes"`
	Goroutines    int     `json:"goroutines"`
	// OutboxPending is didoedge_outbox_pending (-1: not read).
	OutboxPending int `json:"outbox_pending"`
}

// chaosPhase is one broker's run.
type chaosPhase struct {
	o       ChaosOptions
	broker  string
	dir     string
	t0      time.Time
	cfgPath string
	metrics string // /metrics URL
	cams    []*simrig.Camera
	mosq    *chaosMosquitto
	subs    []*chaosSubscriber

	mu       sync.Mutex
	rt       *proc
	rtStart  time.Time
	starts   int
	exits    []string // unexpected exits of the runtime
	faults   []Fault
	samples  []ChaosSample
	tmpfs    bool
	fillPath string
}

// Chaos runs the fault script against each broker in turn and writes
// report.json and report.md into o.Out.
func Chaos(ctx context.Context, o ChaosOptions) (*ChaosReport, error) {
	o.defaults()
	if o.Cameras < 1 || o.Cameras > simrig.MaxCameras {
		return nil, fmt.Errorf("bench chaos: %d cameras outside [1, %d]", o.Cameras, simrig.MaxCameras)
	}
	if o.Out == "" || o.Self == "" {
		return nil, errors.New("bench chaos: output directory and runtime binary required")
	}
	for _, b := range o.Brokers {
		if b != "mosquitto" && b != "embedded" {
			return nil, fmt.Errorf("bench chaos: broker %q: want mosquitto or embedded", b)
		}
	}
	// Absolute paths: the runtime's config names files that it resolves
	// against the config file's directory.
	var err error
	if o.Out, err = filepath.Abs(o.Out); err != nil {
		return nil, err
	}
	if o.ModelsDir, err = filepath.Abs(o.ModelsDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	rep := &ChaosReport{Duration: o.Duration.String(), FaultEvery: o.FaultEvery.String(), Warmup: o.Warmup.String(),
		Cameras: o.Cameras, FPS: o.FPS, Seed: o.Seed, Subscribers: o.Subscribers}
	per := o.Duration / time.Duration(len(o.Brokers))
	for i, b := range o.Brokers {
		fmt.Fprintf(o.Progress, "bench chaos: %s for %v\n", b, per)
		ph := &chaosPhase{o: o, broker: b, dir: filepath.Join(o.Out, b)}
		ph.o.Seed = o.Seed + int64(i)
		pr, err := ph.run(ctx, per)
		if err != nil {
			return nil, fmt.Errorf("bench chaos %s: %w", b, err)
		}
		rep.Phases = append(rep.Phases, *pr)
	}
	rep.finish()
	if err := rep.write(o.Out); err != nil {
		return nil, err
	}
	return rep, nil
}

func (ph *chaosPhase) logf(format string, args ...any) {
	fmt.Fprintf(ph.o.Progress, "%7.1fs %s: %s\n", time.Since(ph.t0).Seconds(), ph.broker, fmt.Sprintf(format, args...))
}

func (ph *chaosPhase) run(ctx context.Context, dur time.Duration) (_ *PhaseReport, err error) {
	o := ph.o
	ph.t0 = time.Now()
	if err := os.RemoveAll(ph.dir); err != nil {
		return nil, err
	}
	work := filepath.Join(ph.dir, "work")
	obDir := filepath.Join(work, "outbox")
	if err := os.MkdirAll(obDir, 0o755); err != nil {
		return nil, err
	}
	// The outbox on a small tmpfs of its own: filling it is a full disk
	// for the outbox alone.
	if os.Geteuid() == 0 {
		if err := syscall.Mount("tmpfs", obDir, "tmpfs", 0, "size="+strconv.FormatInt(o.TmpfsBytes, 10)); err == nil {
			ph.tmpfs = true
			defer func() {
				if e := syscall.Unmount(obDir, 0); e != nil {
					err = errors.Join(err, fmt.Errorf("unmount %s: %w", obDir, e))
				}
			}()
		} else {
			ph.logf("no tmpfs (%v): disk_full faults skipped", err)
		}
	}
	ph.fillPath = filepath.Join(obDir, "chaos-fill")
	ref, err := demo.ReadReference(o.ModelsDir)
	if err != nil {
		return nil, err
	}
	dopts := demo.Options{ModelsDir: o.ModelsDir, WorkDir: work, FPS: o.FPS, Seed: 1, Logger: o.Log, Precompute: 16}
	for i := range o.Cameras {
		c, err := simrig.StartRigCamera(dopts.Rig(), ref.Depth.Input.Width, ref.Depth.Input.Height, i)
		if err != nil {
			return nil, err
		}
		ph.cams = append(ph.cams, c)
		defer c.Server.Close()
	}
	bport, err := freePort()
	if err != nil {
		return nil, err
	}
	hport, err := freePort()
	if err != nil {
		return nil, err
	}
	brokerAddr := "127.0.0.1:" + strconv.Itoa(bport)
	dopts.BrokerListen, dopts.HTTP, dopts.UpdateInterval = brokerAddr, "127.0.0.1:"+strconv.Itoa(hport), o.UpdateInterval
	ph.metrics = "http://" + dopts.HTTP + "/metrics"
	if ph.broker == "mosquitto" {
		bin, err := FindMosquitto()
		if err != nil {
			return nil, err
		}
		ph.mosq = &chaosMosquitto{bin: bin, dir: ph.dir, addr: brokerAddr}
		if err := ph.mosq.start(ctx); err != nil {
			return nil, err
		}
		defer ph.mosq.stop()
		dopts.MQTT = "tcp://" + brokerAddr
	}
	writeCfg := func(path, vehicle, outboxDir string) error {
		doc, err := demo.ConfigDoc(dopts, ref, ph.cams)
		if err != nil {
			return err
		}
		al := doc["alerts"].(map[string]any)
		al["vehicle"] = vehicle
		al["outbox"] = map[string]any{"dir": outboxDir}
		al["embedded"].(map[string]any)["store"] = map[string]any{"dir": filepath.Join(work, "broker")}
		data, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		return os.WriteFile(path, data, 0o644)
	}
	ph.cfgPath = filepath.Join(ph.dir, "config.yaml")
	if err := writeCfg(ph.cfgPath, "chaos", obDir); err != nil {
		return nil, err
	}
	topic := "didoedge/chaos/+/events"
	for i := range o.Subscribers {
		s, err := newChaosSubscriber(brokerAddr, fmt.Sprintf("chaos-sub-%d", i), topic, filepath.Join(ph.dir, fmt.Sprintf("sub-%d.jsonl", i)), ph.t0)
		if err != nil {
			return nil, err
		}
		ph.subs = append(ph.subs, s)
		defer s.close()
	}
	if ph.broker == "embedded" {
		// The embedded broker lives in the runtime: a set-up run (another
		// vehicle, another outbox) opens the broker so that the
		// subscribers' persistent sessions exist in its store before the
		// measured runtime assigns its first seq.
		setup := filepath.Join(ph.dir, "setup.yaml")
		if err := writeCfg(setup, "chaos-setup", filepath.Join(work, "setup-outbox")); err != nil {
			return nil, err
		}
		p, err := startProc(o.Self, []string{"run", "--config", setup, "--quiet"}, filepath.Join(ph.dir, "setup.log"))
		if err != nil {
			return nil, err
		}
		for _, s := range ph.subs {
			if err := s.waitSubscribed(ctx, 3*time.Minute); err != nil {
				p.stop(syscall.SIGKILL, time.Second)
				return nil, err
			}
		}
		if !p.stop(syscall.SIGTERM, 30*time.Second) {
			ph.logf("set-up runtime did not stop within 30 s (SIGKILLed)")
		}
		for _, s := range ph.subs {
			s.reset()
		}
	} else {
		for _, s := range ph.subs {
			if err := s.waitSubscribed(ctx, time.Minute); err != nil {
				return nil, err
			}
		}
	}
	ph.logf("subscribers ready; runtime starts")
	if err := ph.startRuntime(); err != nil {
		return nil, err
	}
	defer ph.killRuntime()
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ph.sample(sctx) })
	err = ph.script(ctx, dur)
	// The windows end with the script: the drain closes the cameras.
	stopSampling()
	wg.Wait()
	if err == nil {
		err = ph.drain(ctx)
	}
	if err != nil {
		return nil, err
	}
	return ph.report(obDir)
}

func (ph *chaosPhase) startRuntime() error {
	p, err := startProc(ph.o.Self, []string{"run", "--config", ph.cfgPath, "--quiet"}, filepath.Join(ph.dir, "runtime.log"))
	if err != nil {
		return err
	}
	ph.mu.Lock()
	ph.rt, ph.rtStart = p, time.Now()
	ph.starts++
	ph.mu.Unlock()
	return nil
}

// killRuntime ends the runtime (end of phase or an error).
func (ph *chaosPhase) killRuntime() {
	ph.mu.Lock()
	p := ph.rt
	ph.mu.Unlock()
	if p != nil && !p.exited() {
		p.stop(syscall.SIGKILL, 5*time.Second)
	}
}

// restartRuntime stops the runtime with sig (SIGTERM: up to 30 s, then
// SIGKILL) and starts it again.
func (ph *chaosPhase) restartRuntime(sig syscall.Signal) (string, error) {
	ph.mu.Lock()
	p := ph.rt
	ph.mu.Unlock()
	detail := fmt.Sprintf("pid %d", p.pid())
	if !p.exited() {
		if !p.stop(sig, 30*time.Second) {
			detail += ", not stopped within 30 s: SIGKILLed"
		} else if sig == syscall.SIGTERM && p.err != nil {
			detail += ", exit: " + p.err.Error()
		}
	}
	return detail, ph.startRuntime()
}

// script runs one fault every FaultEvery until dur has passed, every
// kind once per round, rounds shuffled by the seed.
func (ph *chaosPhase) script(ctx context.Context, dur time.Duration) error {
	o := ph.o
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 29))
	end := ph.t0.Add(dur)
	var round []string
	tick := time.NewTicker(o.FaultEvery)
	defer tick.Stop()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	var pending []func() // restores due at the next half period
	var restoreAt time.Time
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-check.C:
			ph.mu.Lock()
			p := ph.rt
			ph.mu.Unlock()
			if p.exited() {
				msg := fmt.Sprintf("%.1fs pid %d: %v", time.Since(ph.t0).Seconds(), p.pid(), p.err)
				ph.logf("runtime exited unexpectedly (%s); restarting", msg)
				ph.mu.Lock()
				ph.exits = append(ph.exits, msg)
				ph.mu.Unlock()
				if err := ph.startRuntime(); err != nil {
					return err
				}
			}
			if len(pending) > 0 && time.Now().After(restoreAt) {
				for _, f := range pending {
					f()
				}
				pending = nil
			}
			continue
		case <-tick.C:
		}
		for _, f := range pending { // a restore not yet run
			f()
		}
		pending = nil
		if len(round) == 0 {
			round = append([]string(nil), FaultKinds...)
			rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		kind := round[0]
		round = round[1:]
		f := Fault{AtSec: time.Since(ph.t0).Seconds(), Kind: kind}
		var restore func()
		var err error
		switch kind {
		case FaultCamera:
			c := ph.cams[rng.IntN(len(ph.cams))]
			c.Server.Close()
			f.Detail = c.Name
			restore = func() {
				if err := c.Server.Start(); err != nil {
					ph.addFault(Fault{AtSec: time.Since(ph.t0).Seconds(), Kind: "camera_restore", Detail: c.Name, Error: err.Error()})
				}
			}
		case FaultBroker:
			if ph.mosq != nil {
				f.Detail = fmt.Sprintf("mosquitto pid %d SIGTERM", ph.mosq.p.pid())
				ph.mosq.stop()
				if err = sleep(ctx, time.Second); err == nil {
					err = ph.mosq.start(ctx)
				}
			} else {
				f.Detail, err = ph.restartRuntime(syscall.SIGTERM)
				f.Detail = "runtime (embedded broker) SIGTERM, " + f.Detail
			}
		case FaultKill:
			f.Detail, err = ph.restartRuntime(syscall.SIGKILL)
		case FaultReload:
			ph.mu.Lock()
			p := ph.rt
			ph.mu.Unlock()
			f.Detail = fmt.Sprintf("pid %d", p.pid())
			err = p.cmd.Process.Signal(syscall.SIGHUP)
		case FaultDisk:
			if !ph.tmpfs {
				f.Detail, f.Skipped = "skipped: no tmpfs", true
				break
			}
			var n int64
			n, err = fillDisk(ph.fillPath)
			f.Detail = fmt.Sprintf("%d bytes", n)
			restore = func() {
				// Whether the runtime saw the full disk (it notices on its
				// next write or probe), then space back.
				m, err := scrapeMetrics(ctx, ph.metrics, "didoedge_outbox_disk_full")
				seen := "runtime not reachable"
				if err == nil {
					seen = fmt.Sprintf("didoedge_outbox_disk_full %g", m["didoedge_outbox_disk_full"])
				}
				os.Remove(ph.fillPath)
				ph.addFault(Fault{AtSec: time.Since(ph.t0).Seconds(), Kind: "disk_freed", Detail: seen})
			}
		}
		if err != nil {
			f.Error = err.Error()
		}
		ph.addFault(f)
		ph.logf("%s %s %s", f.Kind, f.Detail, f.Error)
		if restore != nil {
			pending, restoreAt = append(pending, restore), time.Now().Add(o.FaultEvery/2)
		}
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	for _, f := range pending {
		f()
	}
	return nil
}

func (ph *chaosPhase) addFault(f Fault) {
	ph.mu.Lock()
	ph.faults = append(ph.faults, f)
	ph.mu.Unlock()
}

// fillDisk writes zeros to path until the file system is full.
func fillDisk(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return n, nil
			}
			return n, err
		}
	}
}

// drain ends the phase: every fault restored, the cameras closed (no
// new episodes), then it waits until the outbox is empty and the
// subscribers got nothing new for 5 s (at most 2 min), and stops the
// runtime with SIGTERM.
func (ph *chaosPhase) drain(ctx context.Context) error {
	os.Remove(ph.fillPath)
	for _, c := range ph.cams {
		c.Server.Close()
	}
	if ph.mosq != nil && ph.mosq.p.exited() {
		if err := ph.mosq.start(ctx); err != nil {
			return err
		}
	}
	ph.logf("draining")
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
		ph.mu.Lock()
		p := ph.rt
		ph.mu.Unlock()
		if p.exited() {
			if err := ph.startRuntime(); err != nil {
				return err
			}
			continue
		}
		m, err := scrapeMetrics(ctx, ph.metrics, "didoedge_outbox_pending")
		if err != nil {
			continue
		}
		quiet := true
		for _, s := range ph.subs {
			if _, _, last := s.snapshot(); time.Since(last) < 5*time.Second {
				quiet = false
			}
		}
		if v, ok := m["didoedge_outbox_pending"]; ok && v == 0 && quiet {
			break
		}
	}
	ph.mu.Lock()
	p := ph.rt
	ph.mu.Unlock()
	if !p.stop(syscall.SIGTERM, 30*time.Second) {
		ph.logf("runtime did not stop within 30 s (SIGKILLed)")
	}
	return sleep(ctx, 2*time.Second) // the last in-flight deliveries
}

// sample reads the runtime's RSS (/proc/PID/status) and goroutines
// (/metrics go_goroutines) every o.Sample.
func (ph *chaosPhase) sample(ctx context.Context) {
	t := time.NewTicker(ph.o.Sample)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ph.mu.Lock()
		p, started := ph.rt, ph.rtStart
		ph.mu.Unlock()
		if p.exited() {
			continue
		}
		rss, err := procRSS(p.pid())
		if err != nil {
			continue
		}
		m, err := scrapeMetrics(ctx, ph.metrics, "go_goroutines", "didoedge_outbox_pending")
		if err != nil || m["go_goroutines"] == 0 {
			continue
		}
		pend := -1
		if v, ok := m["didoedge_outbox_pending"]; ok {
			pend = int(v)
		}
		s := ChaosSample{AtSec: time.Since(ph.t0).Seconds(), PID: p.pid(), SinceStartSec: time.Since(started).Seconds(),
			RSSBytes: rss, Goroutines: int(m["go_goroutines"]), OutboxPending: pend}
		ph.mu.Lock()
		ph.samples = append(ph.samples, s)
		ph.mu.Unlock()
	}
}

// outboxState reads the stopped runtime's outbox: the last seq assigned,
// the acknowledged seq and the seqs still pending.
func outboxState(dir string) (last, acked uint64, pending map[uint64]bool, err error) {
	ob, err := outbox.Open(outbox.Options{Dir: dir, MaxBytes: 1 << 30, MaxRecords: 1 << 20, SegmentBytes: 4 << 20})
	if err != nil {
		return 0, 0, nil, err
	}
	defer ob.Close()
	st := ob.Stats()
	pending = map[uint64]bool{}
	for _, r := range ob.Pending(0, 1<<20, nil) {
		pending[r.Seq] = true
	}
	return st.LastSeq, st.AckedSeq, pending, nil
}
