package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/objstore/s3test"
	"github.com/didoedge/didoedge/internal/testmodels"
)

// endTime is the time of an END event line.
var endTime = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} END `)

// s3TestEnv is an in-process command environment whose store reaches srv
// through the AWS_* variables srv gives (as a pod's would).
func s3TestEnv(srv *s3test.Server) (*cliEnv, *bytes.Buffer, *bytes.Buffer) {
	env, out, errb := modelTestEnv()
	env.objects = objstore.NewStore(func() (objstore.Config, error) { return objstore.ConfigFromEnv(srv.Getenv, "") }, env.log)
	return env, out, errb
}

// sameTree fails unless the trees a and b hold the same files with the
// same bytes; it returns the number of files.
func sameTree(t *testing.T, a, b string) int {
	t.Helper()
	files := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			m[rel], err = os.ReadFile(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fa, fb := files(a), files(b)
	if len(fa) != len(fb) {
		t.Fatalf("%s holds %d files, %s %d", a, len(fa), b, len(fb))
	}
	for name, data := range fa {
		if other, ok := fb[name]; !ok || !bytes.Equal(data, other) {
			t.Fatalf("%s: differs between %s and %s (present: %v)", name, a, b, ok)
		}
	}
	return len(fa)
}

// TestRecordingsOnObjectStorage: `didoedge run` records a drive (the test
// models on 40 lossless frames, maps recorded), the recording is uploaded
// to a real S3-compatible server (Versity Gateway on 127.0.0.1), and
// `record export s3://... --kitti DIR --maps` writes the same data set,
// byte for byte (images, meta.json, splits, frames.txt, every .npy map),
// as the export of the local file; `replay s3://... --compare` exits 0
// and prints the same lines as the local replay (the file's name aside).
// An object cut at 60% (a writer killed mid-upload) exports its complete
// chunks and says so, as the same cut file does locally: the reader's
// size comes from the GET's Content-Length. A missing object, a damaged
// one and an s3:// output directory are errors that name the URL.
func TestRecordingsOnObjectStorage(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "fleet")
	dir := t.TempDir()
	writeReplayFrames(t, dir, 40)
	testmodels.Write(t, dir)
	// Chunks of 64 KiB: the drive spans several, so a cut file keeps some.
	runYAML := strings.Replace(fmt.Sprintf(replayConfig, "flicker.yaml"), "queue: 64,", "queue: 64, chunk_bytes: 65536,", 1)
	for name, text := range map[string]string{"flicker.yaml": replayFlicker, "run.yaml": runYAML} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, so, se := modelTestEnv()
	if code := run(ctx, env, []string{"run", "--config", filepath.Join(dir, "run.yaml")}); code != 0 {
		t.Fatalf("run: exit %d: %s", code, se)
	}
	liveEvents := strings.Count(so.String(), "\n")
	files, _ := filepath.Glob(filepath.Join(dir, "rec", "rec-*.mcap"))
	if len(files) != 1 || liveEvents < 4 {
		t.Fatalf("recordings %v, %d live events", files, liveEvents)
	}
	local := files[0]
	if n := srv.Upload(t, filepath.Join(dir, "rec"), "fleet", "recordings/replaycar"); n != 1 {
		t.Fatalf("uploaded %d objects", n)
	}
	remote := "s3://fleet/recordings/replaycar/" + filepath.Base(local)

	// record export --maps: the same data set from the object as from the file.
	exportOut := func(env *cliEnv, file, out string) string {
		t.Helper()
		var so, se bytes.Buffer
		env.stdout, env.stderr = &so, &se
		if code := run(ctx, env, []string{"record", "export", file, "--kitti", out, "--maps"}); code != 0 {
			t.Fatalf("record export %s: exit %d: %s", file, code, se.String())
		}
		return strings.ReplaceAll(so.String(), file, "FILE")
	}
	lenv, _, _ := modelTestEnv()
	renv, _, _ := s3TestEnv(srv)
	localKITTI, remoteKITTI := filepath.Join(dir, "kitti-local"), filepath.Join(dir, "kitti-s3")
	lo, ro := exportOut(lenv, local, localKITTI), exportOut(renv, remote, remoteKITTI)
	if lo != strings.ReplaceAll(ro, remoteKITTI, localKITTI) || !strings.Contains(ro, "exported 40 frames (64x32) of FILE") ||
		!strings.Contains(ro, "depth 40, laplace_scale 40, epistemic 40") {
		t.Fatalf("export output from s3:\n%s\nlocal:\n%s", ro, lo)
	}
	// 40 PNGs, 120 maps, meta.json, frames.txt and the split files.
	if n := sameTree(t, localKITTI, remoteKITTI); n < 40+120+2 {
		t.Fatalf("the export holds %d files", n)
	}

	// replay --compare: the same lines from the object as from the file.
	replayOut := func(env *cliEnv, so *bytes.Buffer, se *bytes.Buffer, file string) string {
		t.Helper()
		if code := run(ctx, env, []string{"replay", file, "--config", filepath.Join(dir, "run.yaml"), "--compare"}); code != 0 {
			t.Fatalf("replay %s --compare: exit %d: %s\n%s", file, code, se, so)
		}
		// The episodes still open at the end of the drive end at the
		// wall-clock time of the end: that time is not the recording's.
		return endTime.ReplaceAllString(strings.ReplaceAll(so.String(), file, "FILE"), "HH:MM:SS.mmm END ")
	}
	lenv, lso, lse := modelTestEnv()
	renv, rso, rse := s3TestEnv(srv)
	lr, rr := replayOut(lenv, lso, lse, local), replayOut(renv, rso, rse, remote)
	if lr != rr || !strings.Contains(rr, "replay FILE: camera front, 40 frames") ||
		!strings.Contains(rr, fmt.Sprintf("replay matches the recording: %d events in 2 zones", liveEvents)) ||
		!strings.Contains(rr, "maps depth: 40 frames") {
		t.Fatalf("replay from s3:\n%s\nlocal:\n%s", rr, lr)
	}

	// A cut object: the complete chunks, as from the same cut file.
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	cutFile := filepath.Join(dir, "cut.mcap")
	os.WriteFile(cutFile, data[:len(data)*6/10], 0o644)
	store := renv.store()
	if err := store.WriteFile(ctx, "s3://fleet/recordings/cut/cut.mcap", data[:len(data)*6/10]); err != nil {
		t.Fatal(err)
	}
	lenv, _, _ = modelTestEnv()
	renv, _, _ = s3TestEnv(srv)
	lo, ro = exportOut(lenv, cutFile, filepath.Join(dir, "cut-local")), exportOut(renv, "s3://fleet/recordings/cut/cut.mcap", filepath.Join(dir, "cut-s3"))
	if lo != strings.ReplaceAll(ro, filepath.Join(dir, "cut-s3"), filepath.Join(dir, "cut-local")) ||
		!strings.Contains(ro, "the recording ends inside a chunk") || strings.Contains(ro, "exported 40 frames") {
		t.Fatalf("export of the cut object:\n%s\nlocal:\n%s", ro, lo)
	}
	sameTree(t, filepath.Join(dir, "cut-local"), filepath.Join(dir, "cut-s3"))

	// A damaged object: a flipped byte in a chunk's compressed data fails
	// its CRC, an error naming the URL and the byte offset.
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 0xff
	if err := store.WriteFile(ctx, "s3://fleet/recordings/bad/bad.mcap", bad); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"replay", "s3://fleet/recordings/none.mcap", "--config", filepath.Join(dir, "run.yaml")},
			[]string{"s3://fleet/recordings/none.mcap", "does not exist"}},
		{[]string{"record", "export", "s3://fleet/recordings/none.mcap", "--kitti", filepath.Join(dir, "none")},
			[]string{"s3://fleet/recordings/none.mcap", "does not exist"}},
		{[]string{"replay", "s3://fleet/recordings/bad/bad.mcap", "--config", filepath.Join(dir, "run.yaml")},
			[]string{"recording s3://fleet/recordings/bad/bad.mcap: at byte ", fmt.Sprintf(" of %d: ", len(bad))}},
		{[]string{"record", "export", remote, "--kitti", "s3://fleet/datasets/x"},
			[]string{"--kitti s3://fleet/datasets/x", "local directory"}},
	} {
		env, _, se := s3TestEnv(srv)
		if code := run(ctx, env, tc.args); code != 1 {
			t.Fatalf("%v: exit %d, want 1: %s", tc.args, code, se)
		}
		for _, w := range tc.want {
			if !strings.Contains(se.String(), w) {
				t.Fatalf("%v: stderr %q lacks %q", tc.args, se, w)
			}
		}
	}
}

// TestTrainAuxUEOnObjectStorage: `train auxue --data s3://...` reads a
// rendered data set from the gateway (each frame once, into the local
// depth cache) and writes the same AuxUE, byte for byte, as the run over
// the local copy with the same seed; its spec names the s3:// data set.
func TestTrainAuxUEOnObjectStorage(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "fleet")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	env, _, errb := modelTestEnv()
	if code := run(context.Background(), env, []string{"sim", "render", "--world", "outdoor", "--frames", "12", "--drives", "3",
		"--size", "32x64", "--workers", "2", "--seed", "5", "--out", data}); code != 0 {
		t.Fatalf("sim render: %s", errb)
	}
	srv.Upload(t, data, "fleet", "datasets/d0")
	models := filepath.Join(dir, "models")
	testmodels.WriteReference(t, models)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	train := func(env *cliEnv, errb *bytes.Buffer, name, data string) {
		t.Helper()
		w := filepath.Join(dir, name)
		if code := run(ctx, env, []string{"train", "auxue", "--depth", filepath.Join(models, "depth.onnx"), "--data", data,
			"--epochs", "2", "--batch", "2", "--k", "4", "--progress=false", "--out", w, "--cache-dir", filepath.Join(w, "cache"),
			"--checkpoint", filepath.Join(w, "auxue.ckpt"), "--summary", filepath.Join(w, "summary.json")}); code != 0 {
			t.Fatalf("train auxue --data %s: %s", data, errb)
		}
	}
	lenv, _, lerr := modelTestEnv()
	train(lenv, lerr, "local", data)
	renv, _, rerr := s3TestEnv(srv)
	train(renv, rerr, "s3", "s3://fleet/datasets/d0")
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := read(filepath.Join(dir, "local", "auxue.onnx")), read(filepath.Join(dir, "s3", "auxue.onnx"))
	if !bytes.Equal(a, b) || len(a) == 0 {
		t.Fatalf("auxue.onnx: %d bytes over s3, %d local, not equal", len(b), len(a))
	}
	// Both runs cached and trained on the same frames.
	var ls, rs struct {
		Frames    int `json:"frames"`
		ValFrames int `json:"val_frames"`
		Steps     int `json:"steps"`
	}
	for p, v := range map[string]any{"local": &ls, "s3": &rs} {
		if err := json.Unmarshal(read(filepath.Join(dir, p, "summary.json")), v); err != nil {
			t.Fatal(err)
		}
	}
	if ls.Frames != 4 || rs != ls {
		t.Fatalf("frames trained on: over s3 %+v, local %+v (want 4: the train drive)", rs, ls)
	}
	t.Logf("trained on %+v", rs)
	spec := string(read(filepath.Join(dir, "s3", "auxue.yaml")))
	if !strings.Contains(spec, "s3://fleet/datasets/d0 split train") {
		t.Fatalf("the spec does not name the s3:// data set:\n%s", spec)
	}
	if string(read(filepath.Join(dir, "local", "auxue.yaml"))) != strings.ReplaceAll(spec, "s3://fleet/datasets/d0", data) {
		t.Fatalf("the specs differ beyond the data set's name")
	}
	// A prefix with no data set names it.
	env, _, errb = s3TestEnv(srv)
	if code := run(ctx, env, []string{"train", "auxue", "--depth", filepath.Join(models, "depth.onnx"), "--data", "s3://fleet/datasets/none",
		"--progress=false", "--out", filepath.Join(dir, "x")}); code != 1 || !strings.Contains(errb.String(), "s3://fleet/datasets/none") {
		t.Fatalf("train auxue on an empty prefix: exit %d: %s", code, errb)
	}
}
