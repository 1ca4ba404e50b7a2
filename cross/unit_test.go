package cross

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/cross/smoke"
)

var unitFiles = []string{"didoedge.service", "didoedge-health.service", "didoedge-health.timer"}

// unitValues reads a unit file into key -> values (repeated keys append).
func unitValues(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is not key=value", path, line)
		}
		kv[k] = append(kv[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestUnitsVerify runs systemd's own checker on the three units. The
// ExecStart binary must exist for `verify`, so the copies point it at this
// test binary; everything else is verified as shipped.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not installed (Debian package systemd; scripts/deps.sh installs it)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, name := range unitFiles {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/didoedge", self)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestUnitMatchesConfig checks the restart policy and hardening of
// didoedge.service, and that its only writable paths are exactly the
// outbox and the TensorRT engine cache of configs/jetson-orin.yaml.
func TestUnitMatchesConfig(t *testing.T) {
	kv := unitValues(t, "didoedge.service")
	for key, want := range map[string]string{
		"Restart": "on-failure", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
		"PrivateTmp": "yes", "ProtectHome": "yes", "User": "didoedge", "DevicePolicy": "closed",
	} {
		if got := kv[key]; len(got) != 1 || got[0] != want {
			t.Errorf("didoedge.service %s=%v, want %s", key, got, want)
		}
	}
	for _, key := range []string{"RestartSec", "StartLimitIntervalSec", "StartLimitBurst"} {
		if len(kv[key]) != 1 {
			t.Errorf("didoedge.service: %s missing", key)
		}
	}
	var nvmap, nvhost bool
	for _, d := range kv["DeviceAllow"] {
		nvmap = nvmap || strings.HasPrefix(d, "/dev/nvmap ")
		nvhost = nvhost || strings.HasPrefix(d, "/dev/nvhost-")
	}
	if !nvmap || !nvhost {
		t.Errorf("DeviceAllow %v: want /dev/nvmap and /dev/nvhost-* nodes", kv["DeviceAllow"])
	}

	rw := strings.Fields(strings.Join(kv["ReadWritePaths"], " "))
	_, d := loadDeployment(t)
	data, err := os.ReadFile(jetsonConfig)
	if err != nil {
		t.Fatal(err)
	}
	inf, err := smoke.ParseInferenceConfig(data, jetsonConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := alerts.ParseConfig(jetsonConfig+" alerts", section(t, &d.Alerts, "alerts"))
	if err != nil {
		t.Fatal(err)
	}
	writable := []string{cfg.Outbox.Dir, inf.Providers[0].EngineCacheDir}
	covered := func(p string) bool {
		for _, r := range rw {
			if p == r || strings.HasPrefix(p, r+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range writable {
		if !covered(p) {
			t.Errorf("%s is written by didoedge but not in ReadWritePaths %v", p, rw)
		}
	}
	if len(rw) != len(writable) {
		t.Errorf("ReadWritePaths %v: want only the outbox and the engine cache %v", rw, writable)
	}

	health := unitValues(t, "didoedge-health.service")
	if cmd := strings.Join(health["ExecStart"], " "); !strings.Contains(cmd, "http://127.0.0.1:8080/healthz") ||
		!strings.Contains(cmd, "restart didoedge.service") || "127.0.0.1:8080" != d.HTTP.Listen {
		t.Errorf("health check %q must curl the config's http.listen %q and restart didoedge.service", cmd, d.HTTP.Listen)
	}
}
