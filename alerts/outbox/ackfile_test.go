package outbox

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The ack file's three states after a run that delivered (acknowledged)
// 5 of 12 records: intact, the pending 7 come back; damaged or deleted,
// all 12 are re-sent, and the log says why in one WARN line (it logged
// err=<nil> for a damaged file, nothing for a deleted one).
func TestAckFileStates(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, path string)
		pending int
		logPart string // "" no WARN
	}{
		{"intact", func(*testing.T, string) {}, 7, ""},
		{"checksum damaged", func(t *testing.T, path string) { flipByte(t, path, 3) }, 12, "reason=\"checksum mismatch (the file is damaged)\""},
		{"wrong size", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("garbage"), 0o640); err != nil {
				t.Fatal(err)
			}
		}, 12, "reason=\"7 bytes, want 20\""},
		{"a directory in its place", func(t *testing.T, path string) {
			os.Remove(path)
			if err := os.Mkdir(path, 0o750); err != nil {
				t.Fatal(err)
			}
		}, 12, "not a regular file (a directory)"},
		{"deleted", func(t *testing.T, path string) { os.Remove(path) }, 12, "no ack file: re-sending every pending record from the oldest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := mustOpen(t, Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 1 << 16})
			for range 12 {
				if _, err := b.Append(func(seq uint64) (Record, error) {
					return Record{Topic: "didoedge/v/front/events", QoS: 1, Payload: payloadOf(seq)}, nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Ack(5); err != nil {
				t.Fatal(err)
			}
			b.Close()
			tc.damage(t, filepath.Join(dir, ackFile))
			var logs bytes.Buffer
			b = mustOpen(t, Options{Dir: dir, MaxBytes: 1 << 20, MaxRecords: 1000, SegmentBytes: 1 << 16,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			defer b.Close()
			if got := b.Pending(0, 100, nil); len(got) != tc.pending || got[len(got)-1].Seq != 12 {
				t.Fatalf("%d pending records, want %d (up to seq 12)", len(got), tc.pending)
			}
			warns := 0
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "ack file") {
					warns++
					if strings.Contains(line, "err=<nil>") || !strings.Contains(line, tc.logPart) {
						t.Fatalf("log line %q, want %q and no err=<nil>", line, tc.logPart)
					}
				}
			}
			if want := map[bool]int{true: 0, false: 1}[tc.logPart == ""]; warns != want {
				t.Fatalf("%d WARN lines about the ack file, want %d:\n%s", warns, want, logs.String())
			}
		})
	}
}
