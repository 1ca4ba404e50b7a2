package onnxrt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// standInCUDART is a libcudart.so.13 with the six calls dev_cuda_open
// looks up, over host memory: a "stream" is a malloc'd token, a copy is
// memcpy. Every stream created or destroyed is appended to the file
// $DIDOEDGE_CUDART_LOG as "create|destroy <token> <device current then>",
// with write(2) so that the test reads it at once.
const standInCUDART = `
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int current = -1;
static void logline(const char *what, void *s) {
	const char *p = getenv("DIDOEDGE_CUDART_LOG");
	if (!p) return;
	int fd = open(p, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (fd < 0) return;
	char b[96];
	int n = snprintf(b, sizeof b, "%s %p %d\n", what, s, current);
	write(fd, b, n);
	close(fd);
}
int cudaSetDevice(int d) { current = d; return 0; }
int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream) {
	if (kind != 4 || !stream) return 1; /* dev_copy: cudaMemcpyDefault on its stream */
	memcpy(dst, src, n);
	return 0;
}
int cudaStreamSynchronize(void *stream) { return stream ? 0 : 400; }
int cudaStreamCreateWithFlags(void **s, unsigned int flags) {
	*s = malloc(16);
	if (!*s) return 2;
	logline("create", *s);
	return 0;
}
int cudaStreamDestroy(void *s) {
	if (!s) return 400; /* cudaErrorInvalidResourceHandle */
	logline("destroy", s);
	free(s);
	return 0;
}
const char *cudaGetErrorString(int rc) { return "stand-in cuda error"; }
`

// TestDevAPICloseFreesCUDA: no GPU is lent here, so a stand-in
// libcudart.so.13 (gcc, above) is what the production code dlopens,
// through LD_LIBRARY_PATH in a child process; everything else
// (NewDevAPI's dlopen and dlsym, DevAPI.Copy's CUDA branch, dev_copy,
// Close, dev_cuda_close) is the code a GPU runs. A DevAPI on device 1
// copies through its stream; Close destroys that stream once, with
// device 1 current; a second Close does nothing; a copy after Close is
// refused instead of reaching a destroyed stream; 100 open/close cycles
// leave no stream behind.
func TestDevAPICloseFreesCUDA(t *testing.T) {
	if os.Getenv("DIDOEDGE_CUDART_LOG") != "" {
		devAPICloseChild(t, os.Getenv("DIDOEDGE_CUDART_LOG"))
		return
	}
	lib, err := ResolveLibrary("")
	if err != nil {
		t.Fatalf("the project's ONNX Runtime must resolve (run bash scripts/deps.sh): %v", err)
	}
	so := buildSharedLibrary(t, "cudart", standInCUDART)
	dir := filepath.Dir(so)
	if err := os.Rename(so, filepath.Join(dir, "libcudart.so.13")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDevAPICloseFreesCUDA$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir, "DIDOEDGE_CUDART_LOG="+filepath.Join(dir, "streams.log"),
		"ONNXRUNTIME_LIB="+lib.Path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDevAPICloseFreesCUDA") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// devAPICloseChild runs the sequence against the stand-in and checks its
// log after each step.
func devAPICloseChild(t *testing.T, logPath string) {
	lib := os.Getenv("ONNXRUNTIME_LIB")
	streams := func() (live int, lines []string) {
		b, _ := os.ReadFile(logPath)
		lines = strings.Fields(strings.TrimSpace(string(b)))
		var out []string
		for i := 0; i+2 < len(lines); i += 3 {
			out = append(out, strings.Join(lines[i:i+3], " "))
			if lines[i] == "create" {
				live++
			} else {
				live--
			}
		}
		return live, out
	}
	d, err := NewDevAPI(lib, true, 1)
	if err != nil {
		t.Fatalf("NewDevAPI with the stand-in libcudart: %v", err)
	}
	live, lines := streams()
	if live != 1 || len(lines) != 1 || !strings.HasSuffix(lines[0], " 1") {
		t.Fatalf("after open: %v; want one stream created on device 1", lines)
	}
	src, dst := []float32{1, 2, 3, 4}, make([]float32, 4)
	if err := d.Copy(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), len(src)); err != nil {
		t.Fatal(err)
	}
	if dst[3] != 4 {
		t.Fatalf("copied %v", dst)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	live, lines = streams()
	token := strings.Fields(lines[0])[1]
	if live != 0 || len(lines) != 2 || lines[1] != fmt.Sprintf("destroy %s 1", token) {
		t.Fatalf("after Close: %v; want the stream %s destroyed once, on device 1", lines, token)
	}
	if !d.Closed() || d.cuda != nil {
		t.Fatalf("Closed %v, C struct %p: want closed and freed", d.Closed(), d.cuda)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, again := streams(); len(again) != 2 {
		t.Fatalf("a second Close: %v", again)
	}
	if err := d.Copy(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), len(src)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a copy after Close: %v, want refused", err)
	}
	for range 100 {
		d, err := NewDevAPI(lib, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if live, lines = streams(); live != 0 || len(lines) != 202 {
		t.Fatalf("after 100 cycles: %d streams live of %d log lines; want 0 of 202", live, len(lines))
	}
}
