// Package durable holds the file-system steps that make a write survive a
// power loss on Linux: after a file is created, renamed or removed in a
// directory, the directory itself must be fsynced for the entry to be on
// disk (fsync of the file alone persists its data, not its name).
package durable

import (
	"fmt"
	"os"
)

// SyncDir fsyncs directory dir, persisting the creations, renames and
// removals of entries in it.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
