package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/didoedge/didoedge/"

// TestImportRules lists every package's imports with `go list` (what the
// compiler sees, tests excluded) and checks the rules.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	rules := []struct {
		from      string   // package prefix
		forbidden []string // import prefixes
	}{
		{"auxue", []string{"runtime", "camera", "calib", "offline", "alerts", "cmd"}},
		{"runtime", []string{"offline", "offline/protocol", "cmd"}},
		{"camera", []string{"offline", "runtime", "calib", "alerts", "auxue", "cmd"}},
		{"alerts", []string{"offline", "runtime", "camera", "calib", "auxue", "cmd"}},
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		for _, r := range rules {
			if pkg != r.from && !strings.HasPrefix(pkg, r.from+"/") {
				continue
			}
			seen++
			for _, imp := range f[1:] {
				rel, ok := strings.CutPrefix(imp, module)
				if !ok {
					continue
				}
				for _, bad := range r.forbidden {
					if rel == bad || strings.HasPrefix(rel, bad+"/") {
						t.Errorf("%s imports %s (rule: %s imports nothing from %v)", pkg, rel, r.from, r.forbidden)
					}
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("only %d packages checked: go list output %q", seen, out)
	}
}
