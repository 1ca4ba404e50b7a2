package main

import (
	"context"

	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/stream"
)

// runDemo runs the whole system on embedded defaults: the simulated camera
// over RTSP, the reference models, the embedded broker and the debug page.
func runDemo(ctx context.Context, env *cliEnv, args []string) error {
	var f demo.Flags
	fs := newFlagSet(env, "demo")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := f.Check(); err != nil {
		return err
	}
	locked := *env
	locked.stdout = &lockedWriter{w: env.stdout}
	env = &locked
	if f.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.Duration)
		defer cancel()
	}
	s, err := f.Start(ctx, env.stdout, env.log)
	defer s.Close()
	if err != nil {
		return err
	}
	// The console's printers stop before the command returns.
	consoleCtx, stopConsole := context.WithCancel(ctx)
	wait := func() {}
	defer func() { stopConsole(); wait() }()
	started := func(p *stream.Pipeline, page string) { wait = s.Console.Start(consoleCtx, p, page) }
	return servePipeline(ctx, env, s.Config, stream.Options{}, true, started)
}
