package mcapcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Report is what the Node reader saw.
type Report struct {
	Mode     string `json:"mode"`
	Error    string `json:"error"`
	Complete bool   `json:"complete"`
	Library  string `json:"library"`
	// Counts are the messages read per topic; Sequences and LogTimes
	// (decimal nanoseconds) list them in reading order.
	Counts    map[string]int      `json:"counts"`
	Sequences map[string][]uint32 `json:"sequences"`
	LogTimes  map[string][]string `json:"logTimes"`
	Channels  map[string]struct {
		Schema   string            `json:"schema"`
		Encoding string            `json:"encoding"`
		Metadata map[string]string `json:"metadata"`
	} `json:"channels"`
	Schemas  map[string]string `json:"schemas"` // name -> encoding
	Metadata []struct {
		Name     string            `json:"name"`
		Metadata map[string]string `json:"metadata"`
	} `json:"metadata"`
	// Decoded is the first message of each topic, decoded (protobuf bytes
	// fields as {bytes, head}).
	Decoded map[string]map[string]any `json:"decoded"`
	// Descriptors compares each protobuf schema with @foxglove/schemas:
	// "ok" or the differences.
	Descriptors map[string]string `json:"descriptors"`
	// JSONChecks checks each JSON channel's first message against its
	// schema's required, additionalProperties and const keywords.
	JSONChecks map[string]string `json:"jsonChecks"`
	Summary    *struct {
		MessageCount         int            `json:"messageCount"`
		ChunkCount           int            `json:"chunkCount"`
		MetadataCount        int            `json:"metadataCount"`
		ChannelMessageCounts map[string]int `json:"channelMessageCounts"`
	} `json:"summary"`
	StreamError    string `json:"streamError"`
	BytesRemaining int    `json:"bytesRemaining"`
}

// LogTimesNS returns a topic's log times as integers.
func (r Report) LogTimesNS(topic string) []uint64 {
	var out []uint64
	for _, s := range r.LogTimes[topic] {
		v, _ := strconv.ParseUint(s, 10, 64)
		out = append(out, v)
	}
	return out
}

// nodeDir is testdata/node beside this file.
func nodeDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "node")
}

// Read runs the Node reader on path in mode "indexed" (through the
// summary) or "stream" (no summary needed). A missing Node or missing
// packages fail the test: they are real peers, installed by scripts/deps.sh.
func Read(t testing.TB, path, mode string) Report {
	t.Helper()
	dir := nodeDir()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("mcapcheck: node not found (install Node; scripts/deps.sh): %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@mcap", "core", "package.json")); err != nil {
		t.Fatalf("mcapcheck: @mcap/core is not installed in %s (run bash scripts/deps.sh): %v", dir, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.cjs", mode, abs)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("mcapcheck %s %s: %v; output %q; stderr %q", mode, path, firstErr(runErr, err), out.String(), errb.String())
	}
	if rep.Error != "" || runErr != nil {
		t.Fatalf("mcapcheck %s %s: @mcap/core cannot read the file: %s (%v; stderr %q)", mode, path, rep.Error, runErr, errb.String())
	}
	return rep
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Check reads a complete file both ways and fails t unless: the indexed
// reader's summary counts equal the messages it read per topic, the
// stream reader reads the same counts and reaches the end, every protobuf
// schema matches @foxglove/schemas, and every JSON channel's first message
// fits its schema. It returns the indexed report.
func Check(t testing.TB, path string) Report {
	t.Helper()
	rep := Read(t, path, "indexed")
	if rep.Summary == nil {
		t.Fatalf("mcapcheck %s: no summary", path)
	}
	total := 0
	for topic, n := range rep.Counts {
		total += n
		if rep.Summary.ChannelMessageCounts[topic] != n {
			t.Errorf("mcapcheck %s: %s: summary counts %d messages, reader read %d", path, topic, rep.Summary.ChannelMessageCounts[topic], n)
		}
	}
	if total != rep.Summary.MessageCount {
		t.Errorf("mcapcheck %s: summary message count %d, read %d", path, rep.Summary.MessageCount, total)
	}
	for name, d := range rep.Descriptors {
		if d != "ok" {
			t.Errorf("mcapcheck %s: schema %s differs from @foxglove/schemas: %s", path, name, d)
		}
	}
	for topic, c := range rep.JSONChecks {
		if c != "ok" {
			t.Errorf("mcapcheck %s: %s: first message does not fit its schema: %s", path, topic, c)
		}
	}
	st := Read(t, path, "stream")
	if !st.Complete || st.StreamError != "" {
		t.Errorf("mcapcheck %s: stream reader did not reach the end cleanly (complete %v, error %q)", path, st.Complete, st.StreamError)
	}
	if fmt.Sprint(st.Counts) != fmt.Sprint(rep.Counts) {
		t.Errorf("mcapcheck %s: stream reader counts %v, indexed %v", path, st.Counts, rep.Counts)
	}
	return rep
}
