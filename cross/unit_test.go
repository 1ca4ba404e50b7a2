package cross

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/offline/modeltool"
	"github.com/didoedge/didoedge/runtime/runconfig"
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
	inf, err := modeltool.ParseInferenceConfig(data, jetsonConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := runconfig.ParseAlerts(jetsonConfig+" alerts", section(t, &d.Alerts, "alerts"))
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
	cmd, env := strings.Join(health["ExecStart"], " "), strings.Join(health["Environment"], " ")
	if env != "DIDOEDGE_HEALTH_URL=http://"+d.HTTP.Listen+"/healthz" || !strings.Contains(cmd, `"$DIDOEDGE_HEALTH_URL"`) ||
		!strings.Contains(cmd, "restart didoedge.service") {
		t.Errorf("health check %q (%s) must curl the config's http.listen %q and restart didoedge.service", cmd, env, d.HTTP.Listen)
	}
	if got := kv["ExecReload"]; len(got) != 1 || got[0] != "/bin/kill -HUP $MAINPID" {
		t.Errorf("didoedge.service ExecReload=%v, want /bin/kill -HUP $MAINPID", got)
	}
	if got := kv["SystemCallFilter"]; len(got) != 1 || got[0] != "@system-service" {
		t.Errorf("didoedge.service SystemCallFilter=%v, want @system-service", got)
	}
	unit, _ := os.ReadFile("didoedge.service")
	if strings.Contains(string(unit), "run` (the streaming runtime) is a later issue") || strings.Contains(string(unit), "cannot start") {
		t.Error("didoedge.service still says that didoedge run does not exist")
	}
}

// TestSecurityExposure: systemd-analyze security rates the shipped units
// (offline). didoedge.service was 3.4 before issue 16 (no syscall filter,
// IPC, mounts or /proc left open), the health service 5.4.
func TestSecurityExposure(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  float64
	}{{"didoedge.service", 1.7}, {"didoedge-health.service", 1.9}} {
		data, err := os.ReadFile(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), tc.name)
		os.WriteFile(p, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/didoedge", "/bin/true")), 0o644)
		out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", p).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze security %s: %v\n%s", tc.name, err, out)
		}
		m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no exposure level in:\n%s", out)
		}
		level, _ := strconv.ParseFloat(string(m[1]), 64)
		if level > tc.max {
			t.Errorf("%s exposure %.1f, want at most %.1f", tc.name, level, tc.max)
		}
		t.Logf("%s: exposure %.1f", tc.name, level)
	}
}
