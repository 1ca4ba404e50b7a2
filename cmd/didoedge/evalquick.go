package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/didoedge/didoedge/offline"
)

// runEvalQuick evaluates the reference models through ONNX Runtime:
// didoedge eval-quick --data DIR [--indoor DIR] [--models models/] [--json].
func runEvalQuick(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "eval-quick")
	data := fs.String("data", "", "simulated outdoor data set (required)")
	indoor := fs.String("indoor", "", "simulated indoor data set for the data-set-change AUC")
	models := fs.String("models", "models", "directory with depth.onnx, depth.yaml and auxue.onnx")
	split := fs.String("split", "all", "split of --data: train, val, test or all")
	maxFrames := fs.Int("max-frames", 0, "use at most this many outdoor frames (0 = all)")
	maxIndoor := fs.Int("max-indoor", 0, "use at most this many indoor frames (0 = all)")
	library := fs.String("library", "", "ONNX Runtime library (default: $ONNXRUNTIME_LIB, then third_party/)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *data == "" {
		return fmt.Errorf("--data is required")
	}
	res, err := offline.QuickEval(ctx, offline.QuickConfig{Data: *data, Indoor: *indoor, Models: *models,
		Library: *library, Split: *split, MaxFrames: *maxFrames, MaxIndoor: *maxIndoor, Log: env.log})
	if err != nil {
		return err
	}
	// JSON has no NaN: figures that could not be computed become null.
	fields := map[string]any{}
	var order []string
	v := reflect.ValueOf(res)
	for i := 0; i < v.NumField(); i++ {
		name := strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0]
		val := v.Field(i).Interface()
		if f, ok := val.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			val = nil
		}
		fields[name] = val
		order = append(order, name)
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(fields)
	}
	for _, name := range order {
		fmt.Fprintf(env.stdout, "%-14s %v\n", name, fields[name])
	}
	return nil
}
