package protocol

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// machine describes the host for the report: CPU model, cores, OS, Go.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if i := strings.IndexByte(line, ':'); i >= 0 {
					model = strings.TrimSpace(line[i+1:])
				}
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d logical CPUs (GOMAXPROCS %d), %s/%s, %s", model, runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.GOOS, runtime.GOARCH, runtime.Version())
}
