//go:build !linux

package broker

import "os"

// releaseMappings: only Linux lists a process's mappings (/proc/self/maps).
func releaseMappings(*os.File) {}
