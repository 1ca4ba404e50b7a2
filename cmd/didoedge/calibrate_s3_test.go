package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/objstore/s3test"
	"github.com/didoedge/didoedge/internal/testmodels"
)

// TestCalibrateOnObjectStorage: two rendered data sets are uploaded to a
// real S3-compatible server (Versity Gateway on 127.0.0.1). Three
// `calibrate shard` processes read the s3:// prefixes as the pods of an
// Indexed Job do (JOB_COMPLETION_INDEX 0-2, credentials and endpoint from
// the AWS_* environment) and write their summaries to s3://; a `calibrate
// merge` process of that prefix writes the calibration to s3://. It equals
// the single-process `calibrate` over the same s3:// data (which writes
// s3:// too) and the one over the local copies: the thresholds come from
// exact histograms, so equal, not only within a bin. No process prints the
// secret key. eval-quick reads s3:// and writes its report there, the same
// figures as over the local copy.
func TestCalibrateOnObjectStorage(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "fleet")
	dir := t.TempDir()
	var local, remote []string
	for i, seed := range []string{"5", "6"} {
		d := filepath.Join(dir, fmt.Sprintf("data%d", i))
		env, _, errb := modelTestEnv()
		if code := run(context.Background(), env, []string{"sim", "render", "--world", "outdoor", "--frames", "9", "--drives", "3",
			"--size", "32x64", "--workers", "2", "--seed", seed, "--out", d}); code != 0 {
			t.Fatalf("sim render: %s", errb)
		}
		srv.Upload(t, d, "fleet", fmt.Sprintf("drives/2026-11/data%d", i))
		local = append(local, "--data", d)
		remote = append(remote, "--data", fmt.Sprintf("s3://fleet/drives/2026-11/data%d", i))
	}
	models := filepath.Join(dir, "models")
	testmodels.WriteReference(t, models)
	// In-process runs get the server through their own store; processes
	// through the environment, with HOME empty of credentials files.
	s3env := func() *cliEnv {
		env, _, _ := modelTestEnv()
		env.objects = objstore.NewStore(func() (objstore.Config, error) { return objstore.ConfigFromEnv(srv.Getenv, "") }, env.log)
		return env
	}
	store := s3env().store()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	env := s3env()
	var errb bytes.Buffer
	env.stderr = &errb
	if code := run(ctx, env, append([]string{"calibrate", "--target-far", "0.02", "--out", "s3://fleet/calibration/single.yaml", "--models", models}, remote...)); code != 0 {
		t.Fatalf("calibrate s3: %s", errb.String())
	}
	lenv, _, lerr := modelTestEnv()
	localOut := filepath.Join(dir, "local.yaml")
	if code := run(ctx, lenv, append([]string{"calibrate", "--target-far", "0.02", "--out", localOut, "--models", models}, local...)); code != 0 {
		t.Fatalf("calibrate local: %s", lerr)
	}

	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 4)
	errs := make([]error, 4)
	home := t.TempDir()
	process := func(i int, extra []string, args ...string) {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcessRuntime$")
		cmd.Env = append(append(append(os.Environ(), "HOME="+home, "DIDOEDGE_HELPER_ARGS="+strings.Join(args, "\x1f")), srv.Env()...), extra...)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		errs[i] = cmd.Run()
	}
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			process(i, []string{fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i), "DIDOEDGE_SHARD_COUNT=3"},
				append([]string{"calibrate", "shard", "--models", models, "--out", "s3://fleet/summaries/run-1/shard-{index}.json"}, remote...)...)
		}()
	}
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("shard %d: %v\n%s", i, errs[i], outs[i].String())
		}
		want := fmt.Sprintf("shard %d of 3: 2 of 6 frames", i)
		if !strings.Contains(outs[i].String(), want) || !strings.Contains(outs[i].String(), "credentials=\"environment AWS_ACCESS_KEY_ID\"") {
			t.Fatalf("shard %d printed %q, want %q and the credential source", i, outs[i].String(), want)
		}
	}
	process(3, nil, "calibrate", "merge", "--target-far", "0.02", "--out", "s3://fleet/calibration/merged.yaml", "s3://fleet/summaries/run-1")
	if errs[3] != nil || !strings.Contains(outs[3].String(), "3 shard(s) merged") {
		t.Fatalf("merge: %v\n%s", errs[3], outs[3].String())
	}
	for i, o := range outs {
		if strings.Contains(o.String(), srv.SecretKey) {
			t.Fatalf("process %d printed the secret key", i)
		}
	}

	load := func(loc string) alerts.Calibration {
		data, err := store.ReadFile(ctx, loc)
		if err != nil {
			t.Fatal(err)
		}
		c, err := alerts.ParseCalibration(loc, data)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	single, merged := load("s3://fleet/calibration/single.yaml"), load("s3://fleet/calibration/merged.yaml")
	loc, err := alerts.LoadCalibration(localOut)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]alerts.Calibration{"merged": merged, "local": loc} {
		if c.TauE != single.TauE || c.TauA != single.TauA || c.ScaleCorrection != single.ScaleCorrection ||
			fmt.Sprint(c.TauEZones) != fmt.Sprint(single.TauEZones) || fmt.Sprint(c.TauAZones) != fmt.Sprint(single.TauAZones) ||
			c.Meta["frames"] != "6" || c.Meta["coverage_after"] != single.Meta["coverage_after"] {
			t.Fatalf("%s %+v\ns3 single %+v", name, c, single)
		}
	}

	// eval-quick over s3:// with its report written there, against the
	// same over the local copy.
	env = s3env()
	var qerr bytes.Buffer
	env.stderr = &qerr
	if code := run(ctx, env, []string{"eval-quick", "--json", "--models", models, "--max-frames", "6", "--data", "s3://fleet/drives/2026-11/data0",
		"--report", "s3://fleet/reports/quick.json"}); code != 0 {
		t.Fatalf("eval-quick s3: %s", qerr.String())
	}
	lenv, lout, lerr := modelTestEnv()
	if code := run(ctx, lenv, []string{"eval-quick", "--json", "--models", models, "--max-frames", "6", "--data", local[1]}); code != 0 {
		t.Fatalf("eval-quick local: %s", lerr)
	}
	rep, err := store.ReadFile(ctx, "s3://fleet/reports/quick.json")
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	if err := json.Unmarshal(rep, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lout.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) || a["frames"] != 6.0 {
		t.Fatalf("eval-quick over s3:\n%v\nlocal:\n%v", a, b)
	}

	// A prefix that holds nothing is an error naming it.
	env = s3env()
	errb.Reset()
	env.stderr = &errb
	if code := run(ctx, env, []string{"calibrate", "merge", "--out", "s3://fleet/calibration/x.yaml", "s3://fleet/summaries/run-2"}); code == 0 ||
		!strings.Contains(errb.String(), "s3://fleet/summaries/run-2") {
		t.Fatalf("merge of an empty prefix: exit %d, %s", code, errb.String())
	}
}
