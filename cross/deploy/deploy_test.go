package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/objstore/s3test"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// decodeStrict decodes one manifest into its Kubernetes API type,
// rejecting unknown fields (a misspelt key such as "completionz" or
// "completionMode" on the wrong level fails) and wrong types.
func decodeStrict(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// variant is one set of the recalibration manifests: cross/deploy/calibrate
// (data and summaries on volumes) or cross/deploy/calibrate-s3 (on object
// storage, credentials from a Secret); both use calibrate/configmap.yaml.
type variant struct {
	dir string
	s3  bool
}

var variants = []variant{{dir: "calibrate"}, {dir: "calibrate-s3", s3: true}}

type manifestSet struct {
	cm            corev1.ConfigMap
	shards, merge batchv1.Job
	secret        corev1.Secret // s3 only
}

func manifests(t *testing.T, v variant) (m manifestSet) {
	decodeStrict(t, "calibrate/configmap.yaml", &m.cm)
	decodeStrict(t, v.dir+"/shards-job.yaml", &m.shards)
	decodeStrict(t, v.dir+"/merge-job.yaml", &m.merge)
	if v.s3 {
		decodeStrict(t, v.dir+"/secret.yaml", &m.secret)
	}
	return m
}

// argAfter returns the value of flag in args ("" if absent).
func argAfter(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// TestManifestsDecodeStrictly: the manifests are the API objects they
// claim (Kind, apiVersion), the shards Job is Indexed with
// DIDOEDGE_SHARD_COUNT equal to its completions, both Jobs run didoedge's
// calibrate shard/merge, and the merge reads where the shards write: one
// summaries claim mounted by both, or, in the s3 variant, the s3:// prefix
// of the shards' --out, with both Jobs taking the Secret's keys, which are
// the environment variables internal/objstore reads. A misspelt field is
// refused by the same decoding (the check can fail).
func TestManifestsDecodeStrictly(t *testing.T) {
	for _, v := range variants {
		t.Run(v.dir, func(t *testing.T) { checkManifests(t, v) })
	}
	b, _ := os.ReadFile("calibrate/shards-job.yaml")
	var bad batchv1.Job
	if err := yaml.UnmarshalStrict(bytes.Replace(b, []byte("completions: 3"), []byte("completionz: 3"), 1), &bad); err == nil ||
		!strings.Contains(err.Error(), "completionz") {
		t.Fatalf("misspelt field accepted: %v", err)
	}
}

func checkManifests(t *testing.T, v variant) {
	m := manifests(t, v)
	cm, shards, merge := m.cm, m.shards, m.merge
	if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" || cm.Data["calibrate.yaml"] == "" {
		t.Fatalf("configmap %s %s keys %v", cm.APIVersion, cm.Kind, cm.Data)
	}
	for _, j := range []batchv1.Job{shards, merge} {
		if j.Kind != "Job" || j.APIVersion != "batch/v1" || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Fatalf("%s: %s %s restart %s", j.Name, j.APIVersion, j.Kind, j.Spec.Template.Spec.RestartPolicy)
		}
	}
	s := shards.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || s.Completions == nil || s.Parallelism == nil || *s.Parallelism > *s.Completions {
		t.Fatalf("shards job spec %+v", s)
	}
	c := s.Template.Spec.Containers[0]
	count := ""
	for _, e := range c.Env {
		if e.Name == "DIDOEDGE_SHARD_COUNT" {
			count = e.Value
		}
	}
	if count != strconv.Itoa(int(*s.Completions)) {
		t.Fatalf("DIDOEDGE_SHARD_COUNT %q, completions %d", count, *s.Completions)
	}
	if strings.Join(c.Args[:2], " ") != "calibrate shard" || !strings.Contains(strings.Join(c.Args, " "), "{index}") {
		t.Fatalf("shard args %q", c.Args)
	}
	margs := merge.Spec.Template.Spec.Containers[0].Args
	if strings.Join(margs[:2], " ") != "calibrate merge" {
		t.Fatalf("merge args %q", margs)
	}
	if !v.s3 {
		claim := func(j batchv1.Job) string {
			for _, v := range j.Spec.Template.Spec.Volumes {
				if v.Name == "summaries" && v.PersistentVolumeClaim != nil {
					return v.PersistentVolumeClaim.ClaimName
				}
			}
			return ""
		}
		if claim(shards) == "" || claim(shards) != claim(merge) {
			t.Fatalf("summaries claims %q and %q", claim(shards), claim(merge))
		}
		return
	}
	out := argAfter(c.Args, "--out")
	for _, a := range []string{argAfter(c.Args, "--data"), out, argAfter(margs, "--out"), margs[len(margs)-1]} {
		if _, err := objstore.ParseURL(a); err != nil {
			t.Fatalf("s3 variant: %q: %v", a, err)
		}
	}
	if out[:strings.LastIndex(out, "/")] != margs[len(margs)-1] {
		t.Fatalf("the merge reads %s, the shards write %s", margs[len(margs)-1], out)
	}
	known := map[string]bool{}
	for _, k := range []string{objstore.EnvAccessKey, objstore.EnvSecretKey, objstore.EnvSession, objstore.EnvEndpoint,
		objstore.EnvEndpointS3, objstore.EnvRegion, objstore.EnvRegionOld} {
		known[k] = true
	}
	sec := m.secret
	if sec.Kind != "Secret" || sec.StringData[objstore.EnvAccessKey] == "" || sec.StringData[objstore.EnvSecretKey] == "" {
		t.Fatalf("secret %s %s keys %v", sec.Kind, sec.Name, sec.StringData)
	}
	for k := range sec.StringData {
		if !known[k] {
			t.Errorf("secret key %s is not read by internal/objstore", k)
		}
	}
	for _, j := range []batchv1.Job{shards, merge} {
		spec := j.Spec.Template.Spec
		ef := spec.Containers[0].EnvFrom
		if len(ef) != 1 || ef[0].SecretRef == nil || ef[0].SecretRef.Name != sec.Name {
			t.Fatalf("%s: envFrom %+v, want the Secret %s", j.Name, ef, sec.Name)
		}
		for _, vol := range spec.Volumes {
			if vol.PersistentVolumeClaim != nil {
				t.Fatalf("%s: claim %s in the s3 variant", j.Name, vol.PersistentVolumeClaim.ClaimName)
			}
		}
	}
}

// TestKubectlParsesManifests runs kubectl offline when it is installed:
// `kubectl apply --dry-run=client` needs an API server even so (discovery
// maps kinds to resources, validation downloads the OpenAPI schema), so
// the offline form is `kubectl label --local --dry-run=client`, which
// parses every document as a Kubernetes object (YAML, apiVersion, kind)
// and nothing more; the schema check is TestManifestsDecodeStrictly's.
func TestKubectlParsesManifests(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("kubectl not installed: bash scripts/deps.sh installs Debian's kubernetes-client")
	}
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"calibrate", []string{"configmap/didoedge-calibrate", "job.batch/didoedge-calibrate-merge", "job.batch/didoedge-calibrate-shards"}},
		{"calibrate-s3", []string{"job.batch/didoedge-calibrate-merge", "secret/didoedge-s3", "job.batch/didoedge-calibrate-shards"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, "label", "--local", "--dry-run=client", "-f", tc.dir, "checked=yes", "-o", "name")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", tc.dir, err, out)
		}
		got := strings.Fields(string(out))
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Fatalf("kubectl parsed %s as %q, want %q", tc.dir, got, tc.want)
		}
	}
}

// TestJobsRunAsWritten runs the Jobs' own commands with the didoedge
// binary, for both variants: the ConfigMap's config (its /models paths
// pointed at seeded test models), three shard processes with
// JOB_COMPLETION_INDEX 0-2 and the manifest's environment, then the merge
// Job's command; the calibration it writes equals a single `didoedge
// calibrate` on the same local data. The s3 variant runs against a Versity
// Gateway holding the data sets at the manifests' s3:// locations, with
// the Secret's keys as the environment (their values the gateway's), and
// no process prints the secret key.
func TestJobsRunAsWritten(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build didoedge")
	}
	bin := filepath.Join(t.TempDir(), "didoedge")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/didoedge")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, v := range variants {
		t.Run(v.dir, func(t *testing.T) { runJobs(t, bin, v) })
	}
}

func runJobs(t *testing.T, bin string, v variant) {
	m := manifests(t, v)
	cm, shards, merge := m.cm, m.shards, m.merge
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	testmodels.WriteReference(t, models)
	root := map[string]string{"/etc/didoedge": filepath.Join(dir, "etc"), "/data": filepath.Join(dir, "data"), "/summaries": filepath.Join(dir, "summaries")}
	for _, d := range root {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfgText := strings.ReplaceAll(cm.Data["calibrate.yaml"], "/models/", models+"/")
	cfgText = strings.ReplaceAll(cfgText, "/tmp/outbox", filepath.Join(dir, "outbox"))
	cfgPath := filepath.Join(root["/etc/didoedge"], "calibrate.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runconfig.Load(cfgPath); err != nil {
		t.Fatalf("the ConfigMap's config: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mapArgs := func(args []string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			for from, to := range root {
				if a == from || strings.HasPrefix(a, from+"/") {
					a = to + strings.TrimPrefix(a, from)
				}
			}
			out[i] = a
		}
		return out
	}
	// The pods' environment besides the manifest's env: HOME without
	// ~/.aws, and in the s3 variant the Secret's keys.
	podEnv := append(os.Environ(), "HOME="+dir)
	var secretKey string
	var srv *s3test.Server
	if v.s3 {
		srv = s3test.Start(t)
		for k := range m.secret.StringData {
			podEnv = append(podEnv, k+"="+srv.Getenv(k))
		}
		secretKey = srv.SecretKey
	}
	var logs bytes.Buffer
	runBin := func(env []string, args ...string) string {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(podEnv, env...)
		out, err := cmd.CombinedOutput()
		logs.Write(out)
		if err != nil {
			t.Fatalf("didoedge %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	drives := []string{"drive-a", "drive-b"}
	for i, drive := range drives {
		runBin(nil, "sim", "render", "--world", "outdoor", "--frames", "4", "--drives", "2", "--size", "32x64",
			"--seed", strconv.Itoa(i+1), "--out", filepath.Join(root["/data"], "exports", drive))
	}
	c := shards.Spec.Template.Spec.Containers[0]
	if v.s3 {
		// The data sets where the manifest reads them.
		var data []string
		for i, a := range c.Args {
			if a == "--data" {
				data = append(data, c.Args[i+1])
			}
		}
		if len(data) != len(drives) {
			t.Fatalf("the shards read %v, the test renders %v", data, drives)
		}
		loc, _ := objstore.ParseURL(data[0])
		srv.MakeBucket(t, loc.Bucket)
		for i, d := range data {
			l, _ := objstore.ParseURL(d)
			srv.Upload(t, filepath.Join(root["/data"], "exports", drives[i]), l.Bucket, l.Key)
		}
	}
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	procs := make([]*exec.Cmd, *shards.Spec.Completions)
	outs := make([]bytes.Buffer, len(procs))
	for i := range procs {
		procs[i] = exec.CommandContext(ctx, bin, mapArgs(c.Args)...)
		procs[i].Env = append(append(podEnv, env...), "JOB_COMPLETION_INDEX="+strconv.Itoa(i))
		procs[i].Stdout, procs[i].Stderr = &outs[i], &outs[i]
		if err := procs[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("shard pod %d: %v\n%s", i, err, outs[i].String())
		}
		logs.Write(outs[i].Bytes())
	}
	margs := merge.Spec.Template.Spec.Containers[0].Args
	runBin(nil, mapArgs(margs)...)
	merged := filepath.Join(root["/summaries"], "calibration.yaml")
	if v.s3 {
		loc, _ := objstore.ParseURL(argAfter(margs, "--out"))
		client, err := objstore.New(srv.Config(), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := client.ReadAll(ctx, loc)
		if err != nil {
			t.Fatalf("the merge's calibration %s: %v", argAfter(margs, "--out"), err)
		}
		merged = filepath.Join(dir, "merged.yaml")
		if err := os.WriteFile(merged, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	single := filepath.Join(dir, "single.yaml")
	runBin(nil, "calibrate", "--config", cfgPath, "--data", filepath.Join(root["/data"], "exports", "drive-a"),
		"--data", filepath.Join(root["/data"], "exports", "drive-b"), "--split", "all", "--target-far", "0.01", "--out", single)
	a, err := alerts.LoadCalibration(merged)
	if err != nil {
		t.Fatal(err)
	}
	b, err := alerts.LoadCalibration(single)
	if err != nil {
		t.Fatal(err)
	}
	if a.TauE != b.TauE || a.TauA != b.TauA || a.ScaleCorrection != b.ScaleCorrection || a.Meta["frames"] != b.Meta["frames"] || a.Meta["shards"] != "3" {
		t.Fatalf("merge job %+v\nsingle run %+v", a, b)
	}
	if secretKey != "" && strings.Contains(logs.String(), secretKey) {
		t.Fatal("a process printed the secret key")
	}
}
