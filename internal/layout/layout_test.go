package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/didoedge/didoedge/"

// rule: no package under From (a path prefix; "" is every package) imports
// a package under any of Forbidden, except packages under one of Except.
type rule struct {
	why       string
	from      string
	except    []string
	forbidden []string
}

// rules are DESIGN.md's import rules, one line each.
var rules = []rule{
	{why: "the method alone", from: "auxue",
		forbidden: []string{"runtime", "camera", "calib", "offline", "alerts", "dataset", "cmd"}},
	{why: "general leaves import nothing of the project but other leaves", from: "pkg",
		forbidden: []string{"auxue", "runtime", "camera", "calib", "offline", "alerts", "dataset", "internal", "cmd"}},
	{why: "camera sources do not import the streaming core", from: "camera",
		forbidden: []string{"offline", "runtime", "calib", "alerts", "auxue", "dataset", "cmd"}},
	{why: "alerts read maps, not models", from: "alerts",
		forbidden: []string{"offline", "runtime", "camera", "calib", "auxue", "dataset", "cmd"}},
	{why: "the alert domain talks to its transports through the sink interface", from: "alerts",
		except:    []string{"alerts/mqttpub", "alerts/broker", "alerts/outbox", "alerts/snapshot", "alerts/schema"},
		forbidden: []string{"alerts/mqttpub", "alerts/broker", "alerts/outbox", "alerts/snapshot"}},
	{why: "inference knows no transport, world, data set or method package", from: "runtime/infer",
		forbidden: []string{"alerts", "camera", "calib", "dataset", "offline", "auxue", "runtime/stream", "runtime/record", "runtime/service", "runtime/apps", "runtime/runconfig", "cmd"}},
	{why: "the ONNX Runtime binding knows no IO spec, model layer or method", from: "runtime/infer/onnxrt",
		forbidden: []string{"runtime", "auxue", "alerts", "camera", "calib", "dataset", "offline", "pkg", "cmd"}},
	{why: "the streaming core knows no simulated world, no service and no application", from: "runtime/stream",
		forbidden: []string{"camera/sim", "camera/simrig", "camera/rtspserver", "dataset", "calib", "offline", "runtime/service", "runtime/apps", "cmd"}},
	{why: "the service layer that run wires imports no application and no simulated world", from: "runtime/service",
		forbidden: []string{"camera/sim", "camera/simrig", "dataset", "calib", "offline", "runtime/apps", "cmd"}},
	{why: "the deployment config runs nothing", from: "runtime/runconfig",
		forbidden: []string{"camera/sim", "dataset", "calib", "offline", "runtime/stream", "runtime/service", "runtime/apps", "cmd"}},
	{why: "the recorder knows no alert engine, no MQTT and writes no data-set layout", from: "runtime/record",
		forbidden: []string{"alerts$", "alerts/mqttpub", "alerts/broker", "alerts/outbox", "dataset", "calib", "offline", "runtime/stream", "runtime/service", "runtime/apps", "cmd"}},
	{why: "calibration imports no application and no deployment config", from: "calib",
		forbidden: []string{"offline", "runtime/apps", "runtime/stream", "runtime/service", "runtime/runconfig", "cmd"}},
	{why: "data sets sit below calibration, the recorder's export and the offline tools", from: "dataset",
		forbidden: []string{"runtime", "alerts", "calib", "auxue", "offline", "cmd"}},
	{why: "data sets know no camera: the simulated world plugs in as a frame source through dataset/simworld alone", from: "dataset",
		except:    []string{"dataset/simworld"},
		forbidden: []string{"camera"}},
	{why: "nothing imports the applications but the binary and other applications", from: "",
		except:    []string{"runtime/apps", "offline", "cmd"},
		forbidden: []string{"runtime/apps"}},
	{why: "nothing imports the offline applications but the binary", from: "",
		except:    []string{"offline", "cmd"},
		forbidden: []string{"offline"}},
	{why: "nothing imports the binary", from: "", except: []string{"cmd"}, forbidden: []string{"cmd"}},
	// A trailing "$" forbids that package alone, not the ones below it.
	{why: "the protocol and offline's libraries do not import the training commands above them", from: "offline/protocol",
		forbidden: []string{"offline$"}},
	{why: "the protocol and offline's libraries do not import the training commands above them", from: "offline/depthtrain",
		forbidden: []string{"offline$", "offline/protocol"}},
	{why: "the protocol and offline's libraries do not import the training commands above them", from: "offline/depthnet",
		forbidden: []string{"offline$", "offline/protocol", "offline/depthtrain"}},
	{why: "the protocol and offline's libraries do not import the training commands above them", from: "offline/modeltool",
		forbidden: []string{"offline$", "offline/protocol"}},
}

// wired are the packages that `didoedge run` wires (the streaming core
// and its service layer): none of them may depend, directly or through
// any other package, on an application.
var wired = []string{"runtime/stream", "runtime/service", "runtime/service/control"}

// under reports whether package path p is prefix or below it ("" holds
// every package).
func under(p, prefix string) bool {
	return prefix == "" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

// TestImportRules lists every package's imports with `go list` (what the
// compiler sees, tests excluded) and checks the rules.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := map[string]int{} // rule -> packages it applied to
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
	rules:
		for _, r := range rules {
			if !under(pkg, r.from) {
				continue
			}
			for _, e := range r.except {
				if under(pkg, e) {
					continue rules
				}
			}
			checked[r.why]++
			for _, imp := range f[1:] {
				rel, ok := strings.CutPrefix(imp, module)
				if !ok {
					continue
				}
				for _, bad := range r.forbidden {
					if exact, ok := strings.CutSuffix(bad, "$"); ok && rel == exact || !ok && under(rel, bad) {
						t.Errorf("%s imports %s (rule: %s: %s imports nothing from %v)", pkg, rel, r.why, r.from, r.forbidden)
					}
				}
			}
		}
	}
	for _, r := range rules {
		if checked[r.why] == 0 {
			t.Errorf("rule %q applied to no package: go list output %q", r.why, out)
		}
	}
}

// TestNoPackageNamedRuntime keeps Go's runtime package name free: no
// package of the module is called runtime (or any standard library name
// the code imports next to it).
func TestNoPackageNamedRuntime(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}}", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && (f[1] == "runtime" || f[1] == "config") {
			t.Errorf("%s is package %s: name it for what it holds", f[0], f[1])
		}
	}
}

// TestRunWiresNoApplication: `go list -deps` of each package that `run`
// wires holds no runtime/apps, offline or simulated-world package.
func TestRunWiresNoApplication(t *testing.T) {
	for _, pkg := range wired {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 2 {
			t.Fatalf("go list -deps %s listed %d packages", pkg, len(deps))
		}
		for _, d := range deps {
			rel, ok := strings.CutPrefix(d, module)
			if !ok {
				continue
			}
			for _, bad := range []string{"runtime/apps", "offline", "camera/sim", "camera/simrig", "dataset", "cmd"} {
				if under(rel, bad) {
					t.Errorf("%s depends on %s (run's wiring must need no application)", pkg, rel)
				}
			}
		}
	}
}
