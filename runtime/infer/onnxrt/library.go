package onnxrt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// The binding (onnxruntime_go v1.27.0) is compiled against the C API of ONNX
// Runtime 1.24.1 (ORT_API_VERSION 24); older libraries cannot serve it.
// scripts/deps.sh fetches BundledVersion: the x64 CPU build into
// third_party/onnxruntime/<BundledVersion>/linux-x64/, and with --gpu
// Microsoft's x64 GPU build (CUDA 13, TensorRT 10 provider libraries beside
// the core) into third_party/onnxruntime/<BundledVersion>-gpu/. The arm64
// CPU build is BundledARM64Version (bundledVersion): 1.29.0's arm64
// library dies while it loads under qemu-user, where the arm64 build is
// tested.
const (
	RequiredVersion     = "1.24.1"
	requiredAPI         = 24
	BundledVersion      = "1.29.0"
	BundledARM64Version = "1.24.1"
)

// bundledVersion is the version scripts/deps.sh fetches for an
// architecture ("x64", "arm64").
func bundledVersion(arch string) string {
	if arch == "arm64" {
		return BundledARM64Version
	}
	return BundledVersion
}

// LibraryEnvVar names the environment variable that points at the library.
const LibraryEnvVar = "ONNXRUNTIME_LIB"

// installHint is appended to every "library missing" error.
const installHint = "install it with `bash scripts/deps.sh` (fetches ONNX Runtime " + BundledVersion +
	" into third_party/onnxruntime/) or point " + LibraryEnvVar + " or the config key library at libonnxruntime.so.1"

// systemLibraryNames are tried last, through the dynamic loader's search path.
func systemLibraryNames() []string { return []string{"libonnxruntime.so.1", "libonnxruntime.so"} }

// Library is a resolved ONNX Runtime shared library.
type Library struct {
	Path    string // file path or a bare soname resolved by the loader
	Source  string // where the path came from: config, env, project, executable, system
	Version string // the library's own version string
	// GPU is true when the CUDA provider's library lies beside the core
	// (a GPU build: libonnxruntime_providers_cuda.so).
	GPU bool
}

// lookup holds the inputs of library resolution, injectable for tests.
type lookup struct {
	configured string
	gpu        bool // a GPU provider is configured: prefer the project's GPU build
	getenv     func(string) string
	workDir    string
	executable string
	goarch     string
	exists     func(string) bool
	probe      func(path string) (probeResult, string, string)
}

func defaultLookup(configured string) lookup {
	wd, _ := os.Getwd()
	exe, _ := os.Executable()
	return lookup{
		configured: configured,
		getenv:     os.Getenv,
		workDir:    wd,
		executable: exe,
		goarch:     runtime.GOARCH,
		exists: func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && !st.IsDir()
		},
		probe: func(p string) (probeResult, string, string) { return probeLibrary(p, requiredAPI) },
	}
}

// ResolveLibrary finds the ONNX Runtime library and checks that it can serve
// the binding. Order: the configured path, $ONNXRUNTIME_LIB, the project-local
// copy made by scripts/deps.sh (third_party/onnxruntime/<version>/linux-<arch>/
// under the module root found from the working directory, or beside the
// executable or one level up), then the system loader path.
func ResolveLibrary(configured string) (Library, error) {
	return ResolveLibraryFor(configured, false)
}

// ResolveLibraryFor is ResolveLibrary for a configuration that names a GPU
// provider (gpu): the project's GPU build (third_party/onnxruntime/
// <version>-gpu/linux-x64/, `scripts/deps.sh --gpu`) comes before its CPU
// build. The configured path and $ONNXRUNTIME_LIB still win.
func ResolveLibraryFor(configured string, gpu bool) (Library, error) {
	l := defaultLookup(configured)
	l.gpu = gpu
	lib, err := l.resolve()
	if err == nil && strings.ContainsRune(lib.Path, os.PathSeparator) {
		lib.GPU = l.exists(filepath.Join(filepath.Dir(lib.Path), ProviderLibrary(ProviderCUDA)))
	}
	return lib, err
}

func (l lookup) resolve() (Library, error) {
	if l.configured != "" {
		return l.check(l.configured, "config key library")
	}
	if p := l.getenv(LibraryEnvVar); p != "" {
		return l.check(p, "$"+LibraryEnvVar)
	}
	var tried []string
	for _, c := range l.projectCandidates() {
		if l.exists(c.path) {
			return l.check(c.path, c.source)
		}
		tried = append(tried, c.path)
	}
	for _, name := range systemLibraryNames() {
		res, ver, _ := l.probe(name)
		switch res {
		case probeOK:
			return Library{Path: name, Source: "system", Version: ver}, nil
		case probeOpenFailed:
			tried = append(tried, name+" (system loader path)")
			continue
		}
		return l.check(name, "system loader path")
	}
	return Library{}, fmt.Errorf("ONNX Runtime library not found (tried %s); %s", strings.Join(tried, ", "), installHint)
}

type candidate struct{ path, source string }

func (l lookup) projectCandidates() []candidate {
	arch := l.goarch
	if arch == "amd64" {
		arch = "x64"
	}
	rels := []string{filepath.Join("third_party", "onnxruntime", bundledVersion(arch), "linux-"+arch, "libonnxruntime.so.1")}
	if l.gpu {
		// Microsoft's GPU build exists for x64 only; a Jetson's comes from
		// JetPack's wheels or a source build (docs/deploy.md).
		rels = append([]string{filepath.Join("third_party", "onnxruntime", BundledVersion+"-gpu", "linux-"+arch, "libonnxruntime.so.1")}, rels...)
	}
	var out []candidate
	root := ModuleRoot(l.workDir, l.exists)
	for _, rel := range rels {
		if root != "" {
			out = append(out, candidate{filepath.Join(root, rel), "project"})
		}
		if l.executable != "" {
			dir := filepath.Dir(l.executable)
			out = append(out,
				candidate{filepath.Join(dir, rel), "executable"},
				candidate{filepath.Join(dir, "..", rel), "executable"})
		}
	}
	return out
}

// ModuleRoot walks up from dir to the first directory holding go.mod.
func ModuleRoot(dir string, exists func(string) bool) string {
	if dir == "" {
		return ""
	}
	for {
		if exists(filepath.Join(dir, "go.mod")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// check probes one explicit path and turns each failure into an error that
// says what the file is and what to do.
func (l lookup) check(path, source string) (Library, error) {
	if strings.ContainsRune(path, os.PathSeparator) && !l.exists(path) {
		return Library{}, fmt.Errorf("ONNX Runtime library %q (from %s) does not exist; %s", path, source, installHint)
	}
	res, ver, dlerr := l.probe(path)
	switch res {
	case probeOK:
		if !versionAtLeast(ver, RequiredVersion) {
			return Library{}, fmt.Errorf("ONNX Runtime library %q (from %s) is version %s, older than %s which the Go binding needs; %s",
				path, source, ver, RequiredVersion, installHint)
		}
		return Library{Path: path, Source: source, Version: ver}, nil
	case probeOpenFailed:
		return Library{}, fmt.Errorf("ONNX Runtime library %q (from %s) cannot be loaded: %s; %s", path, source, dlerr, installHint)
	case probeNotORT, probeNoBase:
		return Library{}, fmt.Errorf("%q (from %s) is not an ONNX Runtime library (no OrtGetApiBase); %s", path, source, installHint)
	case probeAPIUnsupported:
		if ver == "" {
			ver = "unknown"
		}
		return Library{}, fmt.Errorf("ONNX Runtime library %q (from %s) is version %s and does not serve C API version %d; the Go binding needs ONNX Runtime >= %s; %s",
			path, source, ver, requiredAPI, RequiredVersion, installHint)
	}
	return Library{}, errors.New("unreachable probe result")
}

// versionAtLeast compares dotted numeric versions ("1.24.1"); a suffix such
// as "-rc1" on a component is ignored. An unparsable version is too old.
func versionAtLeast(have, want string) bool {
	h, okH := parseVersion(have)
	w, okW := parseVersion(want)
	if !okH || !okW {
		return false
	}
	for i := range 3 {
		if h[i] != w[i] {
			return h[i] > w[i]
		}
	}
	return true
}

func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, false
	}
	for i, p := range parts {
		if j := strings.IndexFunc(p, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
			p = p[:j]
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}
