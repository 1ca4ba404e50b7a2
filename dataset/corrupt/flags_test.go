package corrupt

import (
	"flag"
	"reflect"
	"strings"
	"testing"
)

// TestFlagsOptions: one type and severity, or --all's every type and
// severity nested; the rest is refused, naming the flags.
func TestFlagsOptions(t *testing.T) {
	for _, tc := range []struct {
		args  string
		types []string
		sevs  []int
		want  string
	}{
		{"--in a --out b --type fog --severity 3", []string{"fog"}, []int{3}, ""},
		{"--in a --out b --all", Names(), []int{1, 2, 3, 4, 5}, ""},
		{"--out b --all", nil, nil, "--in and --out are required"},
		{"--in a --all", nil, nil, "--in and --out are required"},
		{"--in a --out b --all --severity 2", nil, nil, "do not combine it with --type or --severity"},
		{"--in a --out b --type fog", nil, nil, "give --type and --severity, or --all"},
		{"--in a --out b --type rain --severity 1", nil, nil, `unknown corruption "rain"`},
		{"--in a --out b --type fog --severity 6", nil, nil, "severity 6 out of range"},
		{"--in s3://fleet/d --out b --all", nil, nil, "sim corrupt --in s3://fleet/d: s3:// is not supported"},
		{"--in a --out s3://fleet/c --all", nil, nil, "sim corrupt --out s3://fleet/c: s3:// is not supported"},
	} {
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(strings.Fields(tc.args)); err != nil {
			t.Fatal(err)
		}
		o, err := f.Options(nil)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %v, want %q", tc.args, err, tc.want)
			}
			continue
		}
		if err != nil || o.In != "a" || o.Out != "b" || !reflect.DeepEqual(o.Types, tc.types) || !reflect.DeepEqual(o.Severities, tc.sevs) || o.Nested != f.All {
			t.Errorf("%s: options %+v, %v", tc.args, o, err)
		}
	}
}
