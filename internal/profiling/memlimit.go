package profiling

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// SetMemoryLimit sets the Go heap's soft limit (runtime/debug.SetMemoryLimit)
// to size (ParseBytes; 0: none), unless GOMEMLIMIT in the environment sets
// it already, which takes precedence.
func SetMemoryLimit(size string) error {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	limit, err := ParseBytes(size)
	if err != nil {
		return err
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return nil
}

// ParseBytes reads a size like 3GiB, 512MiB, 1.5 GiB or 100000 (bytes).
func ParseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	num := strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			mult, num = u.mult, strings.TrimSpace(strings.TrimSuffix(num, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a size (e.g. 3GiB, 512MiB, 0)", s)
	}
	return int64(v * float64(mult)), nil
}
