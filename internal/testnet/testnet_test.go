package testnet

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatal ends only the calling
// goroutine, so that a test can check that a helper fails.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failureOf runs fn with a recorder and returns its Fatalf message ("" if none).
func failureOf(t *testing.T, fn func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); fn(r) }()
	<-done
	return r.msg
}

func TestWaitListening(t *testing.T) {
	tests := []struct {
		name    string
		listen  time.Duration // delay before a listener opens; < 0: none
		timeout time.Duration
		wantErr bool
	}{
		{"already listening", 0, time.Second, false},
		{"listens later", 150 * time.Millisecond, 5 * time.Second, false},
		{"never listens", -1, 150 * time.Millisecond, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			port := FreePort(t)
			if tc.listen >= 0 {
				opened := make(chan net.Listener, 1)
				go func() {
					time.Sleep(tc.listen)
					l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
					if err != nil {
						t.Error(err)
					}
					opened <- l
				}()
				defer func() {
					if l := <-opened; l != nil {
						l.Close()
					}
				}()
			}
			start := time.Now()
			msg := failureOf(t, func(tb testing.TB) { WaitListening(tb, port, tc.timeout) })
			if got := msg != ""; got != tc.wantErr {
				t.Fatalf("failed = %v (%q), want %v", got, msg, tc.wantErr)
			}
			if tc.wantErr && (!strings.Contains(msg, "127.0.0.1:"+strconv.Itoa(port)) || time.Since(start) < tc.timeout) {
				t.Fatalf("failure %q after %v, want the address after %v", msg, time.Since(start), tc.timeout)
			}
			if !tc.wantErr && time.Since(start) < tc.listen {
				t.Fatalf("returned after %v, before the listener opened at %v", time.Since(start), tc.listen)
			}
		})
	}
}
