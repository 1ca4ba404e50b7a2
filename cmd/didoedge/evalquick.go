package main

import (
	"context"
	"fmt"
	"io"

	"github.com/didoedge/didoedge/offline"
)

// runEvalQuick evaluates the reference models through ONNX Runtime:
// didoedge eval-quick --data DIR [--indoor DIR] [--models models/] [--json];
// `eval-quick shard` and `eval-quick merge` split it.
func runEvalQuick(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 && args[0] == "merge" {
		return runEvalQuickMerge(ctx, env, args[1:])
	}
	sharded := len(args) > 0 && args[0] == "shard"
	name := "eval-quick"
	if sharded {
		args, name = args[1:], "eval-quick shard"
	}
	var f offline.QuickFlags
	fs := newFlagSet(env, name)
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := f.Config(ctx, env.store(), env.log)
	if err != nil {
		return err
	}
	if sharded {
		return f.Shard(ctx, cfg, env.store(), env.stdout)
	}
	res, err := offline.QuickEval(ctx, cfg)
	if err != nil {
		return err
	}
	return offline.PrintReport(ctx, env.store(), f.Report, env.stdout, func(w io.Writer) error {
		if err := res.Write(w, f.JSON); err != nil {
			return err
		}
		if !f.JSON {
			res.WriteSideBySide(w)
		}
		return nil
	})
}

// runEvalQuickMerge prints the merged figures of eval-quick shards.
func runEvalQuickMerge(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "eval-quick merge")
	report := fs.String("report", "", "also write the merged figures (JSON) to this file or s3:// object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("usage: didoedge eval-quick merge [--report FILE] SUMMARY|DIR...")
	}
	files, err := env.store().Expand(ctx, fs.Args(), ".json")
	if err != nil {
		return fmt.Errorf("eval-quick merge: %w", err)
	}
	m, err := offline.QuickMergeFiles(files, func(f string) ([]byte, error) { return env.store().ReadFile(ctx, f) })
	if err != nil {
		return err
	}
	return offline.PrintReport(ctx, env.store(), *report, env.stdout, m.WriteJSON)
}
