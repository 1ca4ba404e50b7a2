package broker

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestStandaloneFlagsApply: the flags lay the -user account (its -read and
// -write filters), -listen, -store and -allow-anonymous over the config;
// bad combinations and values are refused, naming the flag.
func TestStandaloneFlagsApply(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		base Config
		args []string
		want func(c *Config) bool
		err  string
	}{
		{"defaults", Config{Listen: DefaultListen}, nil, func(c *Config) bool {
			return c.Listen == DefaultListen && !c.AllowAnonymous && len(c.Users) == 0 && c.Store.Dir == "" &&
				c.Store.MaxBytes == DefaultStoreMaxBytes && c.Store.MaxMessages == DefaultStoreMaxMessages
		}, ""},
		{"user", Config{Listen: DefaultListen}, []string{"-user", "cam", "-password-env", "PW", "-read", "a/#, b/+", "-write", "a/x,,",
			"-listen", "127.0.0.1:1999", "-store", dir, "-allow-anonymous"}, func(c *Config) bool {
			return c.Listen == "127.0.0.1:1999" && c.AllowAnonymous && c.Store.Dir == dir && reflect.DeepEqual(c.Users,
				[]UserConfig{{Username: "cam", PasswordEnv: "PW", Read: []string{"a/#", "b/+"}, Write: []string{"a/x"}}})
		}, ""},
		{"config kept", Config{Listen: ":1", AllowAnonymous: true, Users: []UserConfig{{Username: "u"}}}, nil, func(c *Config) bool {
			return c.Listen == ":1" && c.AllowAnonymous && len(c.Users) == 1
		}, ""},
		{"no password", Config{}, []string{"-user", "cam"}, nil, "-user needs exactly one of -password-file or -password-env"},
		{"two passwords", Config{}, []string{"-user", "cam", "-password-env", "PW", "-password-file", file}, nil, "exactly one"},
		{"bad read", Config{}, []string{"-user", "cam", "-password-env", "PW", "-read", "a/#/b"}, nil, `-read "a/#/b": `},
		{"bad write", Config{}, []string{"-user", "cam", "-password-env", "PW", "-write", "a+"}, nil, `-write "a+": `},
		{"bad listen", Config{}, []string{"-listen", "127.0.0.1"}, nil, "-listen: "},
		{"store not a directory", Config{}, []string{"-store", file}, nil, "embedded.store.dir"},
	} {
		var f StandaloneFlags
		fs := flag.NewFlagSet("broker", flag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c := tc.base
		err := f.Apply(&c)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case !tc.want(&c):
			t.Errorf("%s: config %+v", tc.name, c)
		}
	}
}
