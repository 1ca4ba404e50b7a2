package infer

import (
	"fmt"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// environment is the process's one ONNX Runtime environment, shared by every
// session through a reference count. ONNX Runtime allows a single OrtEnv per
// process and the binding stores it in package state, so this is the one
// package-level mutable value in the project (see the package doc).
type environment struct {
	mu   sync.Mutex
	refs int
	lib  Library
}

var ortEnv environment

// acquireEnvironment initializes the environment on first use with the
// library found by ResolveLibrary(configured) and takes a reference. A later
// caller asking for a different library gets an error: one process, one
// library.
func acquireEnvironment(configured string) (Library, error) {
	ortEnv.mu.Lock()
	defer ortEnv.mu.Unlock()
	if ortEnv.refs > 0 {
		if configured != "" && configured != ortEnv.lib.Path {
			return Library{}, fmt.Errorf("ONNX Runtime is already loaded from %q; cannot also load %q in the same process", ortEnv.lib.Path, configured)
		}
		ortEnv.refs++
		return ortEnv.lib, nil
	}
	lib, err := ResolveLibrary(configured)
	if err != nil {
		return Library{}, err
	}
	ort.SetSharedLibraryPath(lib.Path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return Library{}, fmt.Errorf("initialize ONNX Runtime from %q: %w", lib.Path, err)
	}
	ortEnv.lib = lib
	ortEnv.refs = 1
	return lib, nil
}

// releaseEnvironment drops a reference; the last one destroys the environment.
func releaseEnvironment() error {
	ortEnv.mu.Lock()
	defer ortEnv.mu.Unlock()
	if ortEnv.refs == 0 {
		return nil
	}
	ortEnv.refs--
	if ortEnv.refs > 0 {
		return nil
	}
	if err := ort.DestroyEnvironment(); err != nil {
		return fmt.Errorf("destroy ONNX Runtime environment: %w", err)
	}
	ortEnv.lib = Library{}
	return nil
}

// Acquire takes a reference on the process's ONNX Runtime environment for
// callers that use the binding directly (tools, tests). Call the returned
// release exactly once.
func Acquire(configuredLibrary string) (Library, func() error, error) {
	lib, err := acquireEnvironment(configuredLibrary)
	if err != nil {
		return Library{}, nil, err
	}
	var once sync.Once
	return lib, func() error {
		var err error
		once.Do(func() { err = releaseEnvironment() })
		return err
	}, nil
}
