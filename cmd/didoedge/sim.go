package main

import (
	"context"
	"fmt"

	"github.com/didoedge/didoedge/camera/rtspserver"
	"github.com/didoedge/didoedge/dataset/corrupt"
	"github.com/didoedge/didoedge/dataset/simworld"
)

// runSim dispatches `didoedge sim <render|corrupt|serve>`.
func runSim(ctx context.Context, env *cliEnv, args []string) error {
	subs := map[string]func(context.Context, *cliEnv, []string) error{
		"render":  runSimRender,
		"corrupt": runSimCorrupt,
		"serve":   runSimServe,
	}
	if len(args) == 0 {
		return fmt.Errorf("usage: didoedge sim render|corrupt|serve [flags]")
	}
	f, ok := subs[args[0]]
	if !ok {
		return fmt.Errorf("unknown sim command %q (want render, corrupt or serve)", args[0])
	}
	return f(ctx, env, args[1:])
}

// runSimRender writes a simulated data set in the KITTI-like layout:
// didoedge sim render --world outdoor|indoor --frames N --size HxW --seed S --out DIR
func runSimRender(ctx context.Context, env *cliEnv, args []string) error {
	var f simworld.RenderFlags
	fs := newFlagSet(env, "sim render")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return f.Render(ctx, env.stdout, env.stderr, env.log)
}

// runSimCorrupt implements `didoedge sim corrupt`: corrupt the RGB frames of
// a rendered data set with one corruption, or build a whole -C set (--all).
func runSimCorrupt(ctx context.Context, env *cliEnv, args []string) error {
	var f corrupt.Flags
	fs := newFlagSet(env, "sim corrupt")
	f.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: didoedge sim corrupt --in DIR --out DIR (--type T --severity S | --all) [--seed N] [--workers N]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return f.Run(ctx, env.stdout, env.stderr, env.log)
}

// runSimServe serves the simulated world over RTSP at rtsp://ADDR/sim
// (M-JPEG or H.264) and relays streams published to any other path.
func runSimServe(ctx context.Context, env *cliEnv, args []string) error {
	var f rtspserver.SimFlags
	fs := newFlagSet(env, "sim serve")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := f.Config(env.log)
	if err != nil {
		return err
	}
	srv, err := rtspserver.New(cfg)
	if err != nil {
		return fmt.Errorf("sim serve: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("sim serve: %w", err)
	}
	defer srv.Close()
	fmt.Fprintln(env.stdout, f.Describe(srv))
	<-ctx.Done()
	return nil
}
