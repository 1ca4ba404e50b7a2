package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "cal.yaml")
	if err := os.WriteFile(regular, []byte("tau_e: 0.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "token")
	if err := os.WriteFile(big, make([]byte, Secret.Limit()+1), 0o600); err != nil {
		t.Fatal(err)
	}
	exact := filepath.Join(dir, "exact")
	if err := os.WriteFile(exact, make([]byte, Secret.Limit()), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		kind       Kind
		wantLen    int
		wantErr    error  // errors.Is target, nil: success
		wantMsg    string // in the message
	}{
		{"regular file", regular, Calibration, 11, nil, ""},
		{"symlink to a regular file", link, Calibration, 11, nil, ""},
		{"exactly the cap", exact, Secret, int(Secret.Limit()), nil, ""},
		{"one byte over the cap", big, Secret, 0, ErrTooLarge, "65537 bytes, the secret cap is 65536"},
		{"/dev/zero", "/dev/zero", Config, 0, ErrNotRegular, "a character device"},
		{"a FIFO without a writer does not block", fifo, Config, 0, ErrNotRegular, "a FIFO"},
		{"a directory", dir, Config, 0, ErrNotRegular, "a directory"},
		{"missing", filepath.Join(dir, "nope"), Config, 0, os.ErrNotExist, "no such file"},
		{"empty path", "", Config, 0, nil, "empty path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			var b []byte
			var err error
			go func() { b, err = Read("live.token_file", tc.path, tc.kind); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Read blocked for 5 s")
			}
			if tc.wantErr == nil && tc.wantMsg == "" {
				if err != nil || len(b) != tc.wantLen {
					t.Fatalf("got %d bytes, %v; want %d bytes", len(b), err, tc.wantLen)
				}
				return
			}
			if err == nil {
				t.Fatalf("read %d bytes, want an error", len(b))
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v is not %v", err, tc.wantErr)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.wantMsg) || !strings.HasPrefix(msg, "live.token_file: ") || !strings.Contains(msg, tc.path) {
				t.Fatalf("error %q: want the key, the path %q and %q", msg, tc.path, tc.wantMsg)
			}
			var fe *Error
			if !errors.As(err, &fe) || fe.Key != "live.token_file" || fe.Path != tc.path {
				t.Fatalf("error %#v is not an *Error with key and path", err)
			}
		})
	}
}

// A /proc file reports size 0 and holds more: Read grows its buffer up to
// the cap instead of trusting the size.
func TestReadProcFile(t *testing.T) {
	b, err := Read("", "/proc/self/status", Config)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "VmRSS:") {
		t.Fatalf("read %d bytes of /proc/self/status without VmRSS", len(b))
	}
}

func TestKindLimits(t *testing.T) {
	for k := Config; k <= Image; k++ {
		if k.Limit() <= 0 || strings.HasPrefix(k.String(), "Kind(") {
			t.Errorf("kind %d: name %q, limit %d", int(k), k, k.Limit())
		}
	}
	if Kind(99).Limit() != 0 {
		t.Error("an unknown kind has a cap")
	}
}
