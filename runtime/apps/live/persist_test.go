package live

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/service/control"
)

// hookApplier runs after once, right after the pipeline applied a change.
type hookApplier struct {
	p     control.Applier
	after func()
}

func (h *hookApplier) Apply(ctx context.Context, cfg *runconfig.Config) error {
	err := h.p.Apply(ctx, cfg)
	if f := h.after; f != nil {
		h.after = nil
		f()
	}
	return err
}

// TestPersistAllOrNothing: ?persist=1 applies and writes as one step or
// not at all. A read-only (0444) file is refused before anything applies
// and stays as it was; a symlinked file keeps its link, the target is
// edited with its mode; a file that cannot be replaced after the apply
// (here: turned into a directory meanwhile) undoes the apply. Each
// outcome is counted once.
func TestPersistAllOrNothing(t *testing.T) {
	r := startRig(t, twoCameras, 10)
	target := r.path
	link := filepath.Join(r.dir, "link.yaml")
	if err := os.Symlink(filepath.Base(target), link); err != nil {
		t.Fatal(err)
	}
	cfg, err := runconfig.Load(link)
	if err != nil {
		t.Fatal(err)
	}
	hook := &hookApplier{p: r.p}
	ctl := control.NewControl(hook, cfg, true, nil)
	ctx := context.Background()
	profileOf := func() string { return r.p.Config().Profile }
	conflict := func(err error, msg string) {
		t.Helper()
		var e *control.Error
		if !errors.As(err, &e) || e.Status != 409 || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%v, want a 409 naming %q", err, msg)
		}
	}

	// Read-only: refused before it applies.
	if err := os.Chmod(target, 0o444); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(target)
	conflict(ctl.SetProfile(ctx, "night", true, "test"), "persist: nothing changed: config file "+target+": read-only (mode 0444): not replaced")
	if got := profileOf(); got != "" {
		t.Fatalf("profile in force after a refused persist: %q", got)
	}
	if ctl.Config() != cfg {
		t.Fatal("the control's configuration changed on a refused persist")
	}
	after, _ := os.ReadFile(target)
	if st, _ := os.Stat(target); string(after) != string(before) || st.Mode().Perm() != 0o444 {
		t.Fatalf("the read-only file was replaced (mode %v)", st.Mode())
	}

	// Through the symlink: the link stays, the target takes the change
	// with its mode.
	if err := os.Chmod(target, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := ctl.SetProfile(ctx, "night", true, "test"); err != nil {
		t.Fatal(err)
	}
	if got := profileOf(); got != "night" {
		t.Fatalf("profile in force: %q", got)
	}
	if lst, err := os.Lstat(link); err != nil || lst.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink became %v (%v)", lst.Mode(), err)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o640 {
		t.Fatalf("target mode %v, want 0640", st.Mode().Perm())
	}
	if back, err := runconfig.Load(target); err != nil || back.Profile != "night" {
		t.Fatalf("the target after persist: %v", err)
	}

	// Not replaceable after the apply: the apply is undone.
	inForce := ctl.Config()
	hook.after = func() {
		os.Rename(target, target+".moved")
		os.Mkdir(target, 0o755)
		os.WriteFile(filepath.Join(target, "x"), nil, 0o644)
	}
	err = ctl.SetProfile(ctx, "", true, "test")
	var e *control.Error
	if !errors.As(err, &e) || e.Status != 500 || !strings.Contains(err.Error(), "persist: not written, the change was undone") {
		t.Fatalf("a failed replacement: %v", err)
	}
	if got := profileOf(); got != "night" || ctl.Config() != inForce {
		t.Fatalf("after the undo: profile %q in force, control's config kept %v", got, ctl.Config() == inForce)
	}
	if got, want := [2]uint64{ctl.Applied(), ctl.Refused()}, [2]uint64{1, 2}; got != want {
		t.Errorf("applied, refused = %v, want %v (one counter per outcome)", got, want)
	}
}
