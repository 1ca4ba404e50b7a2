package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/apps/debugpage"
	"github.com/didoedge/didoedge/runtime/apps/live"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/service"
	"github.com/didoedge/didoedge/runtime/service/control"
	"github.com/didoedge/didoedge/runtime/stream"
)

// runRun runs the streaming pipeline of a config file until SIGINT or
// SIGTERM; SIGHUP reloads zones and thresholds.
func runRun(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "run")
	path := fs.String("config", "", "runtime config file (YAML; see configs/vehicle.yaml)")
	quiet := fs.Bool("quiet", false, "do not print alert events on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("--config FILE is required")
	}
	cfg, err := runconfig.Load(*path)
	if err != nil {
		return err
	}
	return servePipeline(ctx, env, cfg, stream.Options{}, !*quiet, nil)
}

// lockedWriter serializes writes from the pipeline goroutine (event
// lines) and others (scene announcements).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// servePipeline binds the HTTP address (a taken one fails before anything
// else starts; /healthz answers "starting" while the models load), builds
// the pipeline, serves the debug page, handles SIGHUP and runs until ctx
// ends; started (if set) is called once everything runs.
func servePipeline(ctx context.Context, env *cliEnv, cfg *runconfig.Config, opts stream.Options, printEvents bool,
	started func(p *stream.Pipeline, httpAddr string)) error {
	opts.Logger = env.log
	if printEvents {
		opts.OnEvent = func(ev *alerts.Event) { fmt.Fprintln(env.stdout, stream.FormatEvent(ev)) }
	}
	var srv *service.Server
	if cfg.HTTP.Listen != runconfig.HTTPOff {
		var err error
		if srv, err = service.Listen(ctx, cfg.HTTP.Listen, service.DefaultStartupGrace, env.log, service.AllowedHosts(cfg.HTTP.AllowedHosts)); err != nil {
			return err
		}
		defer srv.Close()
	}
	var lv *live.Server
	if cfg.Live.Enabled() {
		var err error
		if lv, err = live.Listen(ctx, cfg.Live, live.Options{Logger: env.log, Intrinsics: cfg.Record.Intrinsics,
			Confidence: cfg.ModelsConfig().DepthSpec.Confidence != nil, Domain: stream.MonitorsDomain(cfg)}); err != nil {
			return err
		}
		defer lv.Close()
		opts.Tap = lv
	}
	p, err := stream.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	httpAddr := ""
	if srv != nil {
		srv.Attach(p, debugpage.Handler(p))
		httpAddr = srv.Addr()
	}
	reload := p.Reload
	var ctl *control.Control
	if lv != nil || cfg.AlertsConfig.MQTT.SetTopics {
		// One control for the API and the set topics: one configuration in force.
		ctl = control.NewControl(p, cfg, cfg.Live.ControlEnabled(), env.log)
		reload = ctl.ReloadFile // SIGHUP replaces the in-memory changes too
	}
	if lv != nil {
		lv.Attach(p.Cameras(), ctl)
		lv.RegisterMetrics(p.Metrics())
		env.log.Info("live view (Foxglove WebSocket)", "url", "ws://"+lv.Addr()+"/", "control", cfg.Live.ControlEnabled())
	} else if ctl != nil {
		ctl.RegisterMetrics(p.Metrics())
	}
	if srv != nil && ctl != nil && cfg.Live.ControlEnabled() && runconfig.IsLoopback(cfg.HTTP.Listen) {
		// The debug page's camera form: it has no token, so only on loopback.
		srv.AttachControl(ctl)
	}
	if cfg.AlertsConfig.MQTT.SetTopics {
		if err := ctl.ServeMQTT(ctx, p.MQTT()); err != nil {
			p.Close()
			return err
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				env.log.Info("SIGHUP: reloading zones and thresholds", "config", cfg.Path)
				// A failed reload is logged once, by the pipeline.
				reload(ctx)
			}
		}
	}()
	if started != nil {
		started(p, httpAddr)
	}
	if httpAddr != "" {
		env.log.Info("debug page", "url", "http://"+httpAddr+"/")
	}
	return p.Run(ctx)
}
