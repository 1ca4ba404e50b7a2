package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"image/png"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func toyTestEnv() (*cliEnv, *bytes.Buffer) {
	var buf bytes.Buffer
	return &cliEnv{stdout: &buf, stderr: &buf, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, &buf
}

// A very short real run writes well-formed outputs (the learning itself is
// checked in package auxue).
func TestToyCommandOutputs(t *testing.T) {
	dir := t.TempDir()
	env, out := toyTestEnv()
	code := run(context.Background(), env, []string{"toy", "--dataset", "b", "--out", dir, "--epochs-scale", "0.01", "--n", "64", "--seed", "3"})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	readCSV := func(name string) [][]string {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return rows
	}
	curve := readCSV("curve.csv")
	if strings.Join(curve[0], ",") != "x,y_true_mean,y_pred,aleatoric,epistemic" || len(curve) != 1+1401 {
		t.Errorf("curve.csv header %v, %d rows", curve[0], len(curve))
	}
	if curve[1][0] != "-7" || curve[len(curve)-1][0] != "7" {
		t.Errorf("grid from %s to %s, want -7 to 7", curve[1][0], curve[len(curve)-1][0])
	}
	if train := readCSV("train.csv"); len(train) != 1+64 || strings.Join(train[0], ",") != "x,y" {
		t.Errorf("train.csv: %d rows, header %v", len(train), train[0])
	}
	f, err := os.Open(filepath.Join(dir, "toy.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 500 {
		t.Errorf("toy.png is %v", b)
	}
	if !strings.Contains(out.String(), "toy main epoch 2/2") || !strings.Contains(out.String(), "AUC outside vs inside") {
		t.Errorf("progress/summary missing:\n%s", out)
	}
}

func TestToyCommandBadFlags(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown data set", []string{"--dataset", "c", "--out", dir}, `unknown data set "c"`},
		{"no out", []string{"--dataset", "a"}, "--out is required"},
		{"bad scale", []string{"--out", dir, "--epochs-scale", "-1"}, "positive epochs scale"},
		{"too few points", []string{"--out", dir, "--n", "3"}, "at least 10 training points"},
		{"extra argument", []string{"--out", dir, "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, out := toyTestEnv()
			if code := run(context.Background(), env, append([]string{"toy"}, tt.args...)); code != 1 || !strings.Contains(out.String(), tt.want) {
				t.Errorf("exit %d, output %q, want %q", code, out, tt.want)
			}
		})
	}
}

// TestToySeedsTable: --seeds prints one table row per seed and the counts.
func TestToySeedsTable(t *testing.T) {
	env, out := toyTestEnv()
	code := run(context.Background(), env, []string{"toy", "--seeds", "2-3", "--epochs-scale", "0.01", "--n", "64"})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| 2 |") || strings.HasPrefix(line, "| 3 |") {
			if strings.Count(line, "|") != 9 {
				t.Errorf("row %q has not 8 columns", line)
			}
			rows++
		}
	}
	if rows != 2 || !strings.Contains(out.String(), "both sides >= 0.9 on") || !strings.Contains(out.String(), "of 2 seeds") {
		t.Fatalf("table:\n%s", out)
	}
}
