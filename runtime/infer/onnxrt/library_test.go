package onnxrt

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionAtLeast(t *testing.T) {
	tests := []struct {
		have, want string
		ok         bool
	}{
		{"1.24.1", "1.24.1", true},
		{"1.24.2", "1.24.1", true},
		{"1.25.0", "1.24.1", true},
		{"2.0", "1.24.1", true},
		{"1.24.0", "1.24.1", false},
		{"1.16.3", "1.24.1", false},
		{"1.9.10", "1.24.1", false},
		{"1.24.1-rc1", "1.24.1", true},
		{"", "1.24.1", false},
		{"garbage", "1.24.1", false},
	}
	for _, tc := range tests {
		if got := versionAtLeast(tc.have, tc.want); got != tc.ok {
			t.Errorf("versionAtLeast(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.ok)
		}
	}
}

// TestResolveOrder checks the lookup order with a fake file system and probe.
func TestResolveOrder(t *testing.T) {
	projectLib := "/src/didoedge/third_party/onnxruntime/" + BundledVersion + "/linux-x64/libonnxruntime.so.1"
	projectGPU := "/src/didoedge/third_party/onnxruntime/" + BundledVersion + "-gpu/linux-x64/libonnxruntime.so.1"
	exeLib := "/opt/didoedge/third_party/onnxruntime/" + BundledARM64Version + "/linux-arm64/libonnxruntime.so.1"
	exeGPU := "/opt/didoedge/third_party/onnxruntime/" + BundledVersion + "-gpu/linux-x64/libonnxruntime.so.1"
	tests := []struct {
		name       string
		configured string
		env        string
		files      []string
		arch       string
		gpu        bool // a GPU provider is configured
		system     bool
		wantPath   string
		wantSource string
		wantErr    string
	}{
		{name: "config first", configured: "/c/lib.so", env: "/e/lib.so", files: []string{"/c/lib.so", "/e/lib.so", projectLib}, wantPath: "/c/lib.so", wantSource: "config key library"},
		{name: "env second", env: "/e/lib.so", files: []string{"/e/lib.so", projectLib}, wantPath: "/e/lib.so", wantSource: "$ONNXRUNTIME_LIB"},
		{name: "env missing is an error", env: "/e/lib.so", files: []string{projectLib}, wantErr: "does not exist; install it with `bash scripts/deps.sh`"},
		{name: "project from module root", files: []string{"/src/didoedge/go.mod", projectLib}, wantPath: projectLib, wantSource: "project"},
		{name: "beside the executable", arch: "arm64", files: []string{exeLib}, wantPath: exeLib, wantSource: "executable"},
		{name: "system last", system: true, wantPath: "libonnxruntime.so.1", wantSource: "system"},
		{name: "nothing", files: []string{"/src/didoedge/go.mod"}, wantErr: "ONNX Runtime library not found"},
		// With a GPU provider configured the GPU build comes first, from
		// the module root or beside the executable; without one, or when
		// it is absent, the CPU build; the config key and the environment
		// still win.
		{name: "gpu: project GPU build first", gpu: true, files: []string{"/src/didoedge/go.mod", projectLib, projectGPU}, wantPath: projectGPU, wantSource: "project"},
		{name: "gpu: GPU build beside the executable", gpu: true, files: []string{exeGPU}, wantPath: exeGPU, wantSource: "executable"},
		{name: "gpu: CPU build when no GPU build", gpu: true, files: []string{"/src/didoedge/go.mod", projectLib}, wantPath: projectLib, wantSource: "project"},
		{name: "cpu providers: CPU build", files: []string{"/src/didoedge/go.mod", projectLib, projectGPU}, wantPath: projectLib, wantSource: "project"},
		{name: "gpu: env wins", gpu: true, env: "/e/lib.so", files: []string{"/e/lib.so", "/src/didoedge/go.mod", projectGPU}, wantPath: "/e/lib.so", wantSource: "$ONNXRUNTIME_LIB"},
		{name: "gpu: config wins", gpu: true, configured: "/c/lib.so", files: []string{"/c/lib.so", "/src/didoedge/go.mod", projectGPU}, wantPath: "/c/lib.so", wantSource: "config key library"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]bool{}
			for _, f := range tc.files {
				files[f] = true
			}
			arch := tc.arch
			if arch == "" {
				arch = "amd64"
			}
			l := lookup{
				configured: tc.configured,
				gpu:        tc.gpu,
				getenv: func(k string) string {
					if k == LibraryEnvVar {
						return tc.env
					}
					return ""
				},
				workDir:    "/src/didoedge/runtime/infer",
				executable: "/opt/didoedge/didoedge",
				goarch:     arch,
				exists:     func(p string) bool { return files[filepath.Clean(p)] },
				probe: func(p string) (probeResult, string, string) {
					if files[p] || (tc.system && p == "libonnxruntime.so.1") {
						return probeOK, RequiredVersion, ""
					}
					return probeOpenFailed, "", "no such file"
				},
			}
			lib, err := l.resolve()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), "bash scripts/deps.sh") {
					t.Fatalf("err = %v does not say how to install the library", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if lib.Path != tc.wantPath || lib.Source != tc.wantSource {
				t.Fatalf("got %q from %q, want %q from %q", lib.Path, lib.Source, tc.wantPath, tc.wantSource)
			}
		})
	}
}

// buildSharedLibrary compiles C source into a shared library with gcc (a
// Debian package that scripts/deps.sh installs).
func buildSharedLibrary(t *testing.T, name, src string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, name+".c")
	so := filepath.Join(dir, name+".so")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", so, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return so
}

// TestCheckRealLibraries probes real shared objects: the project's ONNX
// Runtime, a library that is not ONNX Runtime, a fake old ONNX Runtime (its
// GetApi refuses API 24, as releases before 1.24 do), and a text file.
func TestCheckRealLibraries(t *testing.T) {
	notORT := buildSharedLibrary(t, "notort", "int deflate_something(void) { return 1; }\n")
	oldORT := buildSharedLibrary(t, "oldort", `
#include <stdint.h>
#include <stddef.h>
typedef struct { const void *(*GetApi)(uint32_t); const char *(*GetVersionString)(void); } base_t;
static const void *get_api(uint32_t v) { return v <= 16 ? (const void *)1 : NULL; }
static const char *version(void) { return "1.16.3"; }
static base_t base = { get_api, version };
const base_t *OrtGetApiBase(void) { return &base; }
`)
	text := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	os.WriteFile(text, []byte("this is not a shared library\n"), 0o644)

	real, err := ResolveLibrary("")
	if err != nil {
		t.Fatalf("the project's ONNX Runtime must resolve (run bash scripts/deps.sh): %v", err)
	}
	if !versionAtLeast(real.Version, RequiredVersion) {
		t.Fatalf("resolved %q with version %q", real.Path, real.Version)
	}

	tests := []struct {
		name, path, want string
	}{
		{"not onnx runtime", notORT, "is not an ONNX Runtime library"},
		{"too old", oldORT, "is version 1.16.3 and does not serve C API version 24; the Go binding needs ONNX Runtime >= 1.24.1"},
		{"not a shared object", text, "cannot be loaded"},
		{"missing", filepath.Join(t.TempDir(), "nope.so"), "does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ResolveLibrary(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("err = %v, want it to name %q and say %q", err, tc.path, tc.want)
			}
			if !strings.Contains(err.Error(), "bash scripts/deps.sh") {
				t.Fatalf("err = %v does not say how to install the library", err)
			}
		})
	}
	if z := "/lib/x86_64-linux-gnu/libz.so.1"; fileExists(z) {
		if _, err := ResolveLibrary(z); err == nil || !strings.Contains(err.Error(), "is not an ONNX Runtime library") {
			t.Fatalf("libz: err = %v", err)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
