package secret

import (
	"fmt"
	"os"
	"strings"

	"github.com/didoedge/didoedge/internal/boundedfile"
)

// Read reads a password from a file (trailing newline trimmed) or an
// environment variable; key names the config key in errors. Neither given:
// "" (no password).
func Read(key, file, env string) (string, error) {
	switch {
	case file != "":
		b, err := boundedfile.Read(key, file, boundedfile.Secret)
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("%s: environment variable %s is not set", key, env)
		}
		return v, nil
	}
	return "", nil
}
