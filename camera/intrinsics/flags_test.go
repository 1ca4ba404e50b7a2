package intrinsics

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlags: --intrinsics and --intrinsics-file parse to the same values
// as ParseList and ReadFile, neither gives nil, both are refused, and a
// bad value's error names its flag.
func TestFlags(t *testing.T) {
	calib := filepath.Join(t.TempDir(), "calib_cam_to_cam.txt")
	if err := os.WriteFile(calib, []byte("P_rect_02: 721.5 0 609.6 44.9 0 721.5 172.9 0.2 0 0 1 0.003\nS_rect_02: 1242 375\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want *Intrinsics
		err  string
	}{
		{nil, nil, ""},
		{[]string{"--intrinsics", "100,101,50,40"}, &Intrinsics{Fx: 100, Fy: 101, Cx: 50, Cy: 40}, ""},
		{[]string{"--intrinsics", "100,101,50,40,640,480"}, &Intrinsics{Fx: 100, Fy: 101, Cx: 50, Cy: 40, Width: 640, Height: 480}, ""},
		{[]string{"--intrinsics-file", calib}, &Intrinsics{Fx: 721.5, Fy: 721.5, Cx: 609.6, Cy: 172.9, Width: 1242, Height: 375}, ""},
		{[]string{"--intrinsics", "1,2,3"}, nil, "flag -intrinsics: "},
		{[]string{"--intrinsics-file", filepath.Join(t.TempDir(), "none.yaml")}, nil, "flag -intrinsics-file: "},
		{[]string{"--intrinsics", "1,2,3,4", "--intrinsics-file", calib}, nil, "--intrinsics and --intrinsics-file are exclusive"},
	} {
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.AddFlags(fs, "list", "file")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		got, err := f.Intrinsics()
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want):
			t.Errorf("%v: %+v, want %+v", tc.args, got, tc.want)
		}
	}
}
