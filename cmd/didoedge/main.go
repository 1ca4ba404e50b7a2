package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/didoedge/didoedge/internal/objstore"
)

// command is one subcommand: run receives the arguments after its name.
type command struct {
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv carries the process-level dependencies a subcommand may use, so that
// tests can run subcommands in-process with their own writers.
type cliEnv struct {
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
	// objects resolves local paths and s3:// URLs; made from the process
	// environment on first use when nil.
	objects *objstore.Store
}

// store returns the location resolver (objects, or one from the
// environment).
func (e *cliEnv) store() *objstore.Store {
	if e.objects == nil {
		e.objects = objstore.FromEnvironment(e.log)
	}
	return e.objects
}

// commands lists every subcommand. Add one line per new subcommand.
func commands() map[string]command {
	return map[string]command{
		"version": {"print the version and build information", runVersion},
		"broker":  {"run the embedded MQTT broker standalone", runBroker},
		"toy":     {"train the generalized AuxUE on the paper's 1D toy data sets", runToy},
		"sim":     {"render, corrupt or serve the simulated driving world", runSim},
		"camera":  {"probe an RTSP camera: codec, size, fps, per-frame latency", runCamera},
		"model":   {"inspect, expose, run or compare ONNX models (inspect|expose|run|compare|export-test)", runModel},
		"run":     {"run the streaming pipeline of a config file (camera -> depth -> AuxUE -> alerts)", runRun},
		"demo":    {"run everything on the simulated camera, embedded broker and reference models", runDemo},
		"train":   {"train the reference depth network or the AuxUE (train depth|auxue)", runTrain},

		"calibrate": {"set alert thresholds and the Laplace scale correction from validation frames", runCalibrate},
		"bench":     {"measure frame-to-MQTT latency (bench latency), memory over a soak (bench soak), alert episodes against a scripted drive (bench scenario), N cameras against the single-session bound (bench multicam), or the training kernels against PyTorch (bench kernels)", runBench},
		"record":    {"recordings: export a recording's frames for calibrate (record export FILE --kitti DIR)", runRecord},
		"replay":    {"run a recording's frames through the pipeline; --compare checks the events against the recorded ones", runReplay},

		"eval-quick": {"evaluate the reference depth and AuxUE models through ONNX Runtime", runEvalQuick},
		"eval":       {"run the paper's depth protocol of a config and write the report (eval --config FILE --out DIR)", runEval},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &cliEnv{
		stdout: os.Stdout,
		stderr: os.Stderr,
		log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	os.Exit(run(ctx, env, os.Args[1:]))
}

// run dispatches to a subcommand and returns the process exit code.
func run(ctx context.Context, env *cliEnv, args []string) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(env.stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "didoedge: unknown command %q\n", args[0])
		usage(env.stderr, cmds)
		return 2
	}
	if err := c.run(ctx, env, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(env.stderr, "didoedge %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: didoedge <command> [flags]")
	fmt.Fprintln(w, "commands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
}

// newFlagSet returns a FlagSet that reports errors instead of exiting.
func newFlagSet(env *cliEnv, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("didoedge "+name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	return fs
}

// parseFlags parses a command's flags and refuses positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}
