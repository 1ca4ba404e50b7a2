package live

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/didoedge/didoedge/runtime/service/control"
)

// fsImmutable is FS_IMMUTABLE_FL of linux/fs.h (chattr +i).
const fsImmutable = 0x10

// setImmutable sets or clears a file's immutable attribute, as chattr
// does (FS_IOC_SETFLAGS); root can write any mode, not an immutable file.
func setImmutable(path string, on bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return fmt.Errorf("FS_IOC_GETFLAGS: %w", err)
	}
	if on {
		flags |= fsImmutable
	} else {
		flags &^= fsImmutable
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		return fmt.Errorf("FS_IOC_SETFLAGS: %w", err)
	}
	return nil
}

// refusedUntouched persists a profile change into a file that cannot
// take it and checks the whole refusal: a 409 naming the file and the
// reason, the profile not applied, the control's configuration kept, one
// refusal counted and nothing applied, the file byte for byte as it was.
func refusedUntouched(t *testing.T, r *rig, ctl *control.Control, file, reason string) {
	t.Helper()
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, applied, refused := ctl.Config(), ctl.Applied(), ctl.Refused()
	err = ctl.SetProfile(context.Background(), "night", true, "test")
	var e *control.Error
	if !errors.As(err, &e) || e.Status != 409 || !strings.Contains(err.Error(), "persist: nothing changed: config file "+file) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("persist into %s: %v, want a 409 naming the file and %q", file, err, reason)
	}
	t.Logf("refused: %v", err)
	if got := r.p.Config().Profile; got != "" {
		t.Errorf("profile %q in force after the refusal", got)
	}
	if ctl.Config() != cfg {
		t.Error("the control's configuration changed on a refusal")
	}
	if ctl.Applied() != applied || ctl.Refused() != refused+1 {
		t.Errorf("applied +%d, refused +%d; want +0, +1", ctl.Applied()-applied, ctl.Refused()-refused)
	}
	if after, err := os.ReadFile(file); err != nil || string(after) != string(before) {
		t.Errorf("the file changed (%v)", err)
	}
}

// TestPersistRefusedImmutable: ?persist=1 onto an immutable config file
// (chattr +i; root writes any mode bits, not this) is refused before
// anything applies.
func TestPersistRefusedImmutable(t *testing.T) {
	r := startRig(t, twoCameras, 10)
	if err := setImmutable(r.path, true); err != nil {
		t.Skipf("cannot make %s immutable here (needs CAP_LINUX_IMMUTABLE and a filesystem with the attribute): %v", r.path, err)
	}
	t.Cleanup(func() { setImmutable(r.path, false) })
	if f, err := os.OpenFile(r.path, os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Fatal("the immutable file opens for writing: the probe proves nothing")
	}
	ctl := control.NewControl(r.p, r.cfg, true, nil)
	refusedUntouched(t, r, ctl, r.path, "operation not permitted")
}

// fullDiskChild marks the re-run of TestPersistRefusedOnFullDisk inside
// its own mount namespace; its value is the directory to mount on.
const fullDiskChild = "DIDOEDGE_TEST_FULL_DISK_MOUNT"

// TestPersistRefusedOnFullDisk: the config file (through a symlink, as
// an operator may keep it) lies on a full filesystem: a 64 KiB tmpfs,
// filled. The test re-runs itself in a child process with a mount
// namespace of its own (CLONE_NEWNS as root, a user namespace
// otherwise), so that the mount never reaches the host and goes with the
// child. The edited file cannot be written beside the target (ENOSPC):
// refused before anything applies, the target unchanged.
func TestPersistRefusedOnFullDisk(t *testing.T) {
	mnt := os.Getenv(fullDiskChild)
	if mnt == "" {
		mnt = t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestPersistRefusedOnFullDisk$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), fullDiskChild+"="+mnt)
		if os.Getuid() == 0 {
			// Go makes / private (MS_REC|MS_PRIVATE) in the child before exec.
			cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		} else {
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
				UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
				GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil && cmd.ProcessState == nil {
			t.Skipf("no mount namespace for the child here: %v", err)
		}
		t.Logf("child:\n%s", out)
		if err != nil {
			t.Fatalf("the child failed: %v", err)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skip("the child skipped (see its output)")
		}
		if !strings.Contains(string(out), "--- PASS: TestPersistRefusedOnFullDisk") {
			t.Fatal("the child did not run the test")
		}
		return
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k,mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs in this namespace: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	r := startRig(t, twoCameras, 10)
	// The config on the tmpfs, reached through a link where it was: the
	// edited file is written beside the link's target.
	text, err := os.ReadFile(r.path)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(mnt, "rt.yaml")
	if err := os.WriteFile(target, text, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, r.path); err != nil {
		t.Fatal(err)
	}
	// Fill it: a file that grows until the filesystem says ENOSPC.
	fill, err := os.Create(filepath.Join(mnt, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 4096); ; {
		if _, err = fill.Write(chunk); err != nil {
			break
		}
	}
	fill.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil || st.Bavail != 0 {
		t.Fatalf("the tmpfs has %d blocks free (%v)", st.Bavail, err)
	}
	ctl := control.NewControl(r.p, r.cfg, true, nil)
	refusedUntouched(t, r, ctl, target, "no space left on device")
	if lst, err := os.Lstat(r.path); err != nil || lst.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link became %v (%v)", lst.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(mnt, ".rt.yaml.*")); len(left) != 0 {
		t.Errorf("the edited file was left beside the target: %v", left)
	}
}
