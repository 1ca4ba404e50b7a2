package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/testmodels"
)

// TestCalibrateShardProcesses: three `didoedge calibrate shard` processes
// run at once, as the pods of an Indexed Job do (JOB_COMPLETION_INDEX 0-2,
// DIDOEDGE_SHARD_COUNT 3, one --out with {index}), then `calibrate merge`
// of their directory writes the same thresholds and scale correction as
// the single-process `didoedge calibrate` (histograms add exactly, so
// equal, not only within a bin). Two data sets are given, so the listing
// spans both. Bad shard settings are refused with their source named.
func TestCalibrateShardProcesses(t *testing.T) {
	dir := t.TempDir()
	var data []string
	for i, seed := range []string{"5", "6"} {
		d := filepath.Join(dir, fmt.Sprintf("data%d", i))
		env, _, errb := modelTestEnv()
		if code := run(context.Background(), env, []string{"sim", "render", "--world", "outdoor", "--frames", "9", "--drives", "3",
			"--size", "32x64", "--workers", "2", "--seed", seed, "--out", d}); code != 0 {
			t.Fatalf("sim render: %s", errb)
		}
		data = append(data, "--data", d)
	}
	models := filepath.Join(dir, "models")
	testmodels.WriteReference(t, models)
	common := append(append([]string{}, data...), "--models", models)

	single := filepath.Join(dir, "single.yaml")
	env, _, errb := modelTestEnv()
	if code := run(context.Background(), env, append([]string{"calibrate", "--target-far", "0.02", "--out", single}, common...)); code != 0 {
		t.Fatalf("calibrate: %s", errb)
	}

	sums := filepath.Join(dir, "summaries")
	if err := os.Mkdir(sums, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 3)
	errs := make([]error, 3)
	for i := range 3 {
		args := append([]string{"calibrate", "shard", "--out", filepath.Join(sums, "shard-{index}.json")}, common...)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcessRuntime$")
		cmd.Env = append(os.Environ(), "DIDOEDGE_HELPER_ARGS="+strings.Join(args, "\x1f"),
			fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i), "DIDOEDGE_SHARD_COUNT=3")
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cmd.Run()
		}()
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("shard %d: %v\n%s", i, errs[i], outs[i].String())
		}
		if want := fmt.Sprintf("shard %d of 3: 2 of 6 frames", i); !strings.Contains(outs[i].String(), want) {
			t.Fatalf("shard %d printed %q, want %q", i, outs[i].String(), want)
		}
	}
	merged := filepath.Join(dir, "merged.yaml")
	env, stdout, errb := modelTestEnv()
	if code := run(context.Background(), env, []string{"calibrate", "merge", "--target-far", "0.02", "--out", merged, sums}); code != 0 {
		t.Fatalf("calibrate merge: %s", errb)
	}
	if !strings.Contains(stdout.String(), "3 shard(s) merged") {
		t.Fatalf("merge report %q", stdout)
	}
	a, err := alerts.LoadCalibration(single)
	if err != nil {
		t.Fatal(err)
	}
	b, err := alerts.LoadCalibration(merged)
	if err != nil {
		t.Fatal(err)
	}
	if a.TauE != b.TauE || a.TauA != b.TauA || a.ScaleCorrection != b.ScaleCorrection ||
		fmt.Sprint(a.TauEZones) != fmt.Sprint(b.TauEZones) || fmt.Sprint(a.TauAZones) != fmt.Sprint(b.TauAZones) ||
		a.Meta["frames"] != "6" || b.Meta["frames"] != "6" || a.Meta["coverage_after"] != b.Meta["coverage_after"] {
		t.Fatalf("merged %+v\nsingle %+v", b, a)
	}

	// Merging two of the three shards is refused: a failed pod must not
	// give a calibration on part of the data.
	env, _, errb = modelTestEnv()
	if code := run(context.Background(), env, []string{"calibrate", "merge", "--out", merged,
		filepath.Join(sums, "shard-0.json"), filepath.Join(sums, "shard-2.json")}); code == 0 || !strings.Contains(errb.String(), "shard(s) 1 missing") {
		t.Fatalf("partial merge: exit %d, %s", code, errb)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "x")
	env, _, errb = modelTestEnv()
	if code := run(context.Background(), env, append([]string{"calibrate", "shard", "--out", filepath.Join(sums, "x.json")}, common...)); code == 0 ||
		!strings.Contains(errb.String(), `JOB_COMPLETION_INDEX="x"`) {
		t.Fatalf("bad index: exit %d, %s", code, errb)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "3")
	t.Setenv("DIDOEDGE_SHARD_COUNT", "3")
	env, _, errb = modelTestEnv()
	if code := run(context.Background(), env, append([]string{"calibrate", "shard", "--out", filepath.Join(sums, "x.json")}, common...)); code == 0 ||
		!strings.Contains(errb.String(), "shard index 3 of 3") {
		t.Fatalf("index out of range: exit %d, %s", code, errb)
	}
}
