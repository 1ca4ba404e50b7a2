package main

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimCorruptEndToEnd(t *testing.T) {
	in := t.TempDir()
	put := func(rel string, data []byte) {
		p := filepath.Join(in, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := image.NewNRGBA(image.Rect(0, 0, 30, 12))
	for y := 0; y < 12; y++ {
		for x := 0; x < 30; x++ {
			img.Set(x, y, color.NRGBA{uint8(8 * x), uint8(20 * y), 90, 255})
		}
	}
	var frame bytes.Buffer
	if err := png.Encode(&frame, img); err != nil {
		t.Fatal(err)
	}
	put("seq/image_02/data/0000000000.png", frame.Bytes())
	put("seq/image_02/data/0000000001.png", frame.Bytes())
	put("seq/proj_depth/groundtruth/image_02/0000000000.png", frame.Bytes()) // not an RGB frame: copied
	put("meta.json", []byte(`{"w": 30}`))
	put("splits/val.txt", []byte("seq 0\n"))
	unchanged := []string{"seq/proj_depth/groundtruth/image_02/0000000000.png", "meta.json", "splits/val.txt"}

	runCLI := func(args ...string) (int, string, string) {
		var so, se bytes.Buffer
		env := &cliEnv{stdout: &so, stderr: &se, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		return run(context.Background(), env, args), so.String(), se.String()
	}

	out := filepath.Join(t.TempDir(), "c")
	code, so, se := runCLI("sim", "corrupt", "--in", in, "--out", out, "--type", "pixelate", "--severity", "5", "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	if !strings.Contains(so, "wrote 2 corrupted frames and 3 unchanged files") || !strings.Contains(se, "2/2 frames") {
		t.Errorf("stdout %q stderr %q", so, se)
	}
	for _, rel := range unchanged {
		a, _ := os.ReadFile(filepath.Join(in, rel))
		b, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s not byte-identical: %v", rel, err)
		}
	}
	f, err := os.Open(filepath.Join(out, "seq/image_02/data/0000000001.png"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got.Bounds() != img.Bounds() {
		t.Fatalf("corrupted frame bounds %v, want %v", got.Bounds(), img.Bounds())
	}
	// pixelate 5 on 30x12 -> 7x3 blocks: neighbours inside a block agree,
	// while the clean gradient changes at every column.
	r0, _, _, _ := got.At(0, 0).RGBA()
	r1, _, _, _ := got.At(1, 0).RGBA()
	if r0 != r1 {
		t.Errorf("pixelated columns 0 and 1 differ (%d vs %d)", r0>>8, r1>>8)
	}

	all := filepath.Join(t.TempDir(), "all")
	if code, _, se := runCLI("sim", "corrupt", "--in", in, "--out", all, "--all", "--workers", "2"); code != 0 {
		t.Fatalf("--all exit %d: %s", code, se)
	}
	for _, p := range []string{"gaussian_noise/1/seq/image_02/data/0000000000.png", "color_quant/5/meta.json", "jpeg_compression/3/splits/val.txt"} {
		if _, err := os.Stat(filepath.Join(all, p)); err != nil {
			t.Errorf("--all: %v", err)
		}
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--in", in, "--out", out, "--type", "rain", "--severity", "1"}, `unknown corruption "rain"`},
		{[]string{"--in", in, "--out", out, "--type", "fog", "--severity", "7"}, "severity 7 out of range"},
		{[]string{"--in", in, "--out", out, "--type", "fog"}, "give --type and --severity, or --all"},
		{[]string{"--in", in, "--out", out, "--all", "--type", "fog"}, "do not combine"},
		{[]string{"--out", out, "--all"}, "--in and --out are required"},
		{[]string{"--in", filepath.Join(in, "nope"), "--out", out, "--all"}, "nope"},
	}
	for _, tc := range bad {
		code, _, se := runCLI(append([]string{"sim", "corrupt"}, tc.args...)...)
		if code == 0 || !strings.Contains(se, tc.want) {
			t.Errorf("%v: exit %d stderr %q, want error containing %q", tc.args, code, se, tc.want)
		}
	}
}
