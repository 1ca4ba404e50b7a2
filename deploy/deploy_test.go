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

func manifests(t *testing.T) (cm corev1.ConfigMap, shards, merge batchv1.Job) {
	decodeStrict(t, "calibrate/configmap.yaml", &cm)
	decodeStrict(t, "calibrate/shards-job.yaml", &shards)
	decodeStrict(t, "calibrate/merge-job.yaml", &merge)
	return cm, shards, merge
}

// TestManifestsDecodeStrictly: the manifests are the API objects they
// claim (Kind, apiVersion), the shards Job is Indexed with
// DIDOEDGE_SHARD_COUNT equal to its completions, both Jobs run didoedge's
// calibrate shard/merge, mount the ConfigMap and one summaries claim, and
// a misspelt field is refused by the same decoding (the check can fail).
func TestManifestsDecodeStrictly(t *testing.T) {
	cm, shards, merge := manifests(t)
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
	if m := merge.Spec.Template.Spec.Containers[0].Args; strings.Join(m[:2], " ") != "calibrate merge" {
		t.Fatalf("merge args %q", m)
	}
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
	b, _ := os.ReadFile("calibrate/shards-job.yaml")
	var bad batchv1.Job
	if err := yaml.UnmarshalStrict(bytes.Replace(b, []byte("completions: 3"), []byte("completionz: 3"), 1), &bad); err == nil ||
		!strings.Contains(err.Error(), "completionz") {
		t.Fatalf("misspelt field accepted: %v", err)
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "label", "--local", "--dry-run=client", "-f", "calibrate", "checked=yes", "-o", "name")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	want := []string{"configmap/didoedge-calibrate", "job.batch/didoedge-calibrate-merge", "job.batch/didoedge-calibrate-shards"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("kubectl parsed %q, want %q", got, want)
	}
}

// TestJobsRunAsWritten runs the Jobs' own commands with the didoedge
// binary: the ConfigMap's config (its /models paths pointed at seeded test
// models), three shard processes with JOB_COMPLETION_INDEX 0-2 and the
// manifest's environment, then the merge Job's command; the calibration it
// writes equals a single `didoedge calibrate` on the same data.
func TestJobsRunAsWritten(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build didoedge")
	}
	cm, shards, merge := manifests(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "didoedge")
	build := exec.Command("go", "build", "-o", bin, "../cmd/didoedge")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
	runBin := func(env []string, args ...string) string {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("didoedge %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for i, drive := range []string{"drive-a", "drive-b"} {
		runBin(nil, "sim", "render", "--world", "outdoor", "--frames", "4", "--drives", "2", "--size", "32x64",
			"--seed", strconv.Itoa(i+1), "--out", filepath.Join(root["/data"], "exports", drive))
	}
	c := shards.Spec.Template.Spec.Containers[0]
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	procs := make([]*exec.Cmd, *shards.Spec.Completions)
	outs := make([]bytes.Buffer, len(procs))
	for i := range procs {
		procs[i] = exec.CommandContext(ctx, bin, mapArgs(c.Args)...)
		procs[i].Env = append(append(os.Environ(), env...), "JOB_COMPLETION_INDEX="+strconv.Itoa(i))
		procs[i].Stdout, procs[i].Stderr = &outs[i], &outs[i]
		if err := procs[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("shard pod %d: %v\n%s", i, err, outs[i].String())
		}
	}
	runBin(nil, mapArgs(merge.Spec.Template.Spec.Containers[0].Args)...)
	single := filepath.Join(dir, "single.yaml")
	runBin(nil, "calibrate", "--config", cfgPath, "--data", filepath.Join(root["/data"], "exports", "drive-a"),
		"--data", filepath.Join(root["/data"], "exports", "drive-b"), "--split", "all", "--target-far", "0.01", "--out", single)
	a, err := alerts.LoadCalibration(filepath.Join(root["/summaries"], "calibration.yaml"))
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
}
