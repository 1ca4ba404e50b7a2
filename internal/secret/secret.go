package secret

import (
	"fmt"
	"os"
	"strings"
)

// Read reads a password from a file (trailing newline trimmed) or an
// environment variable; key names the config key in errors. Neither given:
// "" (no password).
func Read(key, file, env string) (string, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", key, err)
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
