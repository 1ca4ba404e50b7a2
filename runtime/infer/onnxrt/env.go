package onnxrt

import (
	"fmt"
	"log/slog"
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
	// pools holds the global thread pools when the first session asked for
	// them (thread_pool: global); nil otherwise.
	pools *GlobalPools
}

var ortEnv environment

// EnvironmentRefs is the number of references held on the process's ONNX
// Runtime environment (sessions and tools not yet closed); 0 when none is
// loaded. Leak checks read it.
func EnvironmentRefs() int {
	ortEnv.mu.Lock()
	defer ortEnv.mu.Unlock()
	return ortEnv.refs
}

// acquireEnvironment initializes the environment on first use with the
// library found by ResolveLibrary(configured) and takes a reference. A later
// caller asking for a different library gets an error: one process, one
// library. With pool set the environment gets ONNX Runtime's global
// intra-op pool; it is created by the first caller, so a later caller asking
// for a global pool the environment lacks, or one with other settings, gets
// an error. Callers with pool nil (sessions with their own pools, tools)
// share any environment.
func acquireEnvironment(configured string, gpu bool, pool *poolSettings, log *slog.Logger) (Library, *GlobalPools, error) {
	ortEnv.mu.Lock()
	defer ortEnv.mu.Unlock()
	if ortEnv.refs > 0 {
		if configured != "" && configured != ortEnv.lib.Path {
			return Library{}, nil, fmt.Errorf("ONNX Runtime is already loaded from %q; cannot also load %q in the same process", ortEnv.lib.Path, configured)
		}
		if pool != nil {
			if ortEnv.pools == nil {
				return Library{}, nil, fmt.Errorf("inference config: thread_pool %q, but this process's ONNX Runtime environment was created without a global thread pool (by a session with thread_pool %q or a tool); one process has one environment", ThreadPoolGlobal, ThreadPoolSession)
			}
			if have := ortEnv.pools.settings; have != *pool {
				return Library{}, nil, fmt.Errorf("inference config: intra_op_threads %d, thread_spinning %t: this process's global thread pool was created with intra_op_threads %d, thread_spinning %t; every session of a process shares it", pool.intraOp, pool.spinning, have.intraOp, have.spinning)
			}
		}
		ortEnv.refs++
		return ortEnv.lib, ortEnv.pools, nil
	}
	lib, err := ResolveLibraryFor(configured, gpu)
	if err != nil {
		return Library{}, nil, err
	}
	if log != nil {
		// Once per process: the library every session of it runs on.
		log.Info("ONNX Runtime loaded", "library", lib.Path, "version", lib.Version, "from", lib.Source, "gpu_build", lib.GPU)
		// A CPU build with a GPU provider configured needs no line of its
		// own: the provider's fallback warning says why (withBuildHint).
	}
	var pools *GlobalPools
	if pool != nil {
		// Created first: the binding's CreateEnv below then returns this
		// environment (OrtEnv is a reference-counted singleton).
		if pools, err = createGlobalPools(lib.Path, *pool); err != nil {
			return Library{}, nil, err
		}
	}
	ort.SetSharedLibraryPath(lib.Path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		if pools != nil {
			pools.release()
		}
		return Library{}, nil, fmt.Errorf("initialize ONNX Runtime from %q: %w", lib.Path, err)
	}
	ortEnv.lib = lib
	ortEnv.pools = pools
	ortEnv.refs = 1
	return lib, pools, nil
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
	err := ort.DestroyEnvironment()
	// The pools' reference is the last one: releasing it destroys the
	// environment and joins the pool's threads.
	if ortEnv.pools != nil {
		ortEnv.pools.release()
		ortEnv.pools = nil
	}
	ortEnv.lib = Library{}
	if err != nil {
		return fmt.Errorf("destroy ONNX Runtime environment: %w", err)
	}
	return nil
}

// Acquire takes a reference on the process's ONNX Runtime environment for
// callers that use the binding directly (tools, tests). Call the returned
// release exactly once.
func Acquire(configuredLibrary string) (Library, func() error, error) {
	lib, _, release, err := AcquireEnv(configuredLibrary, false, nil, nil)
	return lib, release, err
}

// AcquireEnv takes a reference as Acquire does, asking for the global thread
// pool when pool is set.
func AcquireEnv(configuredLibrary string, gpu bool, pool *poolSettings, log *slog.Logger) (Library, *GlobalPools, func() error, error) {
	lib, pools, err := acquireEnvironment(configuredLibrary, gpu, pool, log)
	if err != nil {
		return Library{}, nil, nil, err
	}
	var once sync.Once
	return lib, pools, func() error {
		var err error
		once.Do(func() { err = releaseEnvironment() })
		return err
	}, nil
}
