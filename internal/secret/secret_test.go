package secret

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("s3cret\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SECRET_TEST_PW", "from-env")
	for _, tc := range []struct {
		name, file, env, want, errHas string
	}{
		{name: "file, newline trimmed", file: file, want: "s3cret"},
		{name: "environment", env: "SECRET_TEST_PW", want: "from-env"},
		{name: "file wins", file: file, env: "SECRET_TEST_PW", want: "s3cret"},
		{name: "none"},
		{name: "missing file", file: filepath.Join(dir, "nope"), errHas: "mqtt.password_file"},
		{name: "unset variable", env: "SECRET_TEST_UNSET", errHas: "SECRET_TEST_UNSET is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Read("mqtt.password_file", tc.file, tc.env)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err %v, want one containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Read = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
