package nnbench

import (
	"flag"
	"strings"
	"testing"
)

// TestFlagsOptions: --threads becomes the thread counts, --only keeps the
// default cases whose name contains it; bad values name their flag.
func TestFlagsOptions(t *testing.T) {
	all := len(DefaultCases())
	first := DefaultCases()[0].Name
	for _, tc := range []struct {
		args    []string
		threads []int
		cases   int
		err     string
	}{
		{nil, []int{1, 2}, all, ""},
		{[]string{"--threads", " 4 ,1"}, []int{4, 1}, all, ""},
		{[]string{"--only", first}, []int{1, 2}, -1, ""}, // every case containing the first one's name
		{[]string{"--threads", "0"}, nil, 0, `--threads: "0" is not a positive integer`},
		{[]string{"--threads", "1,x"}, nil, 0, `--threads: "x"`},
		{[]string{"--only", "no such case"}, nil, 0, `--only "no such case" matches no case`},
	} {
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		o, err := f.Options(nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if len(o.Threads) != len(tc.threads) || o.Rounds != 5 || o.Python != "/usr/bin/python3" {
			t.Errorf("%v: options %+v", tc.args, o)
		}
		for i := range tc.threads {
			if o.Threads[i] != tc.threads[i] {
				t.Errorf("%v: threads %v, want %v", tc.args, o.Threads, tc.threads)
			}
		}
		if tc.cases >= 0 && len(o.Cases) != tc.cases {
			t.Errorf("%v: %d cases, want %d", tc.args, len(o.Cases), tc.cases)
		}
		for _, c := range o.Cases {
			if !strings.Contains(c.Name, f.Only) {
				t.Errorf("%v: case %q kept", tc.args, c.Name)
			}
		}
	}
}
