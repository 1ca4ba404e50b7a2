//go:build !linux

package broker

import "os"

// releaseMappings: only Linux lists a process's mappings (/proc/self/maps).
func releaseMappings(*os.File) {}

// mappingsOf: none known without /proc/self/maps.
func mappingsOf(dev, ino uint64) [][2]uintptr { return nil }
