package calibrate

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/internal/objstore"
)

// TestDataFlagsInputs: every --data becomes an input with the shared
// layout and KITTI depth root; a location that cannot be opened is
// refused, naming its flag.
func TestDataFlagsInputs(t *testing.T) {
	store := objstore.NewStore(func() (objstore.Config, error) { return objstore.Config{}, errors.New("no credentials") }, nil)
	a, b := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		args []string
		n    int
		want string
	}{
		{[]string{"--data", a, "--data", b, "--layout", "kitti", "--kitti-depth", b}, 2, ""},
		{nil, 0, ""},
		{[]string{"--data", a, "--data", "s3://bucket/set"}, 0, "--data s3://bucket/set: "},
		{[]string{"--data", a, "--kitti-depth", "s3://bucket/gt"}, 0, "--kitti-depth s3://bucket/gt: "},
	} {
		var d DataFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		d.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		in, err := d.Inputs(context.Background(), store)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
			}
			continue
		}
		if err != nil || len(in) != tc.n {
			t.Fatalf("%v: %d inputs, %v", tc.args, len(in), err)
		}
		for i, want := range []string{a, b}[:tc.n] {
			if in[i].Dir != want || in[i].FS == nil || in[i].Layout != "kitti" || in[i].KITTIDepth != b || in[i].KITTIDepthFS == nil {
				t.Errorf("input %d: %+v", i, in[i])
			}
		}
		if d.Split != "val" {
			t.Errorf("split %q, want val", d.Split)
		}
	}
}
