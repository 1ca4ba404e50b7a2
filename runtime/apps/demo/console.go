package demo

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/didoedge/didoedge/camera/sim"
	"github.com/didoedge/didoedge/camera/simrig"
	"github.com/didoedge/didoedge/runtime/record"
	"github.com/didoedge/didoedge/runtime/stream"
)

// Console is what `didoedge demo` prints on the terminal: the set-up once
// the pipeline runs, a line when the simulated scene changes, and every
// zone's level and fused signals periodically. Out must be safe for
// concurrent writes (the pipeline prints events to it too).
type Console struct {
	Out           io.Writer
	Cameras       []*simrig.Camera
	Width, Height int
	FPS           float64
	// MQTT is the external broker (empty: the embedded one).
	MQTT        string
	TopicPrefix string
	// ZonesEvery is the period of the zone lines (0: none).
	ZonesEvery time.Duration
}

// Start prints the set-up of the running pipeline p (page: the debug
// page's address, "" without one) and starts the scene announcer and the
// zone printer until ctx ends; wait waits for them.
func (c Console) Start(ctx context.Context, p *stream.Pipeline, page string) (wait func()) {
	w, cam := c.Out, c.Cameras[0]
	if len(c.Cameras) == 1 {
		fmt.Fprintf(w, "didoedge demo: simulated camera %s (%dx%d, %g fps)\n", cam.URL, c.Width, c.Height, c.FPS)
	} else {
		for _, cc := range c.Cameras {
			fmt.Fprintf(w, "didoedge demo: simulated camera %s %s (heading %+g deg, seed %d, %dx%d, %g fps)\n",
				cc.Name, cc.URL, cc.Heading, cc.Seed, c.Width, c.Height, c.FPS)
		}
	}
	if b := p.BrokerAddr(); b != "" {
		host, port := splitHostPort(b)
		fmt.Fprintf(w, "didoedge demo: embedded MQTT broker %s; watch: mosquitto_sub -h %s -p %s -t '%s/#' -v\n",
			b, host, port, c.TopicPrefix)
	} else {
		fmt.Fprintf(w, "didoedge demo: publishing to %s\n", c.MQTT)
	}
	if page != "" {
		fmt.Fprintf(w, "didoedge demo: debug page http://%s/  (metrics: /metrics)\n", page)
	}
	fmt.Fprintf(w, "didoedge demo: scenario:")
	for _, ph := range cam.Scenario.Phases() {
		fmt.Fprintf(w, " %s %v,", ph.Name, ph.Duration)
	}
	fmt.Fprintf(w, " looping; alert events follow, one line each\n")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		announcePhases(ctx, w, cam.Scenario)
	}()
	if c.ZonesEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			printZones(ctx, w, p, c.ZonesEvery)
		}()
	}
	return wg.Wait
}

// RecordConfig is the record section of a demo run with --record: the
// simulated camera's intrinsics (for export and Foxglove's 3D panel) and
// the record defaults.
func RecordConfig(mode, dir, format string, width, height int, seed int64) (record.Config, error) {
	probe, err := sim.NewRenderer(sim.Config{World: sim.WorldOutdoor, Width: width, Height: height, Seed: seed})
	if err != nil {
		return record.Config{}, err
	}
	fx, fy, cx, cy := probe.Intrinsics()
	rc := record.Config{Mode: mode, Dir: dir, FrameFormat: format, Intrinsics: []float64{fx, fy, cx, cy}}.WithDefaults()
	return rc, rc.Validate("record")
}

// printZones prints every zone's level and fused signals periodically.
func printZones(ctx context.Context, w io.Writer, p *stream.Pipeline, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			cams := p.Cameras()
			for _, cam := range cams {
				zs := p.CameraZoneStatus(cam)
				if len(zs) == 0 {
					continue
				}
				if len(cams) == 1 {
					fmt.Fprintln(w, stream.FormatZones(now, zs))
				} else {
					fmt.Fprintln(w, cam+" "+stream.FormatZones(now, zs))
				}
			}
		}
	}
}

// announcePhases prints a line when the simulated scene changes.
func announcePhases(ctx context.Context, w io.Writer, sc *simrig.Scenario) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	last := -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if cur := sc.Current(); cur >= 0 && cur != last {
				last = cur
				fmt.Fprintf(w, "%s scene  %s\n", time.Now().Format("15:04:05.000"), sc.Phases()[cur].Name)
			}
		}
	}
}

func splitHostPort(addr string) (string, string) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:]
		}
	}
	return addr, ""
}
