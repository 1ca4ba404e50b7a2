package onnxrt

import (
	"strings"
	"testing"
	"unsafe"
)

// TestDevAPICloseFreesCUDA: no GPU is lent here, so the CUDA runtime's
// five calls are the counting stand-in of device_cgo.go; everything else
// (DevAPI.Copy's CUDA branch, dev_copy, Close, dev_cuda_close) is the
// code a GPU runs. A DevAPI on device 1 copies through its stream; Close
// destroys that stream once, with device 1 current; a second Close does
// nothing; a copy after Close is refused instead of reaching a destroyed
// stream (or a host memcpy on device pointers).
func TestDevAPICloseFreesCUDA(t *testing.T) {
	live0, created0, destroyed0, _ := fakeCUDAStreams()
	d, err := newFakeCUDADevAPI(1)
	if err != nil {
		t.Fatal(err)
	}
	if live, created, _, _ := fakeCUDAStreams(); live != live0+1 || created != created0+1 {
		t.Fatalf("after open: %d streams live, %d created; want one more of each", live, created)
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
	live, _, destroyed, dev := fakeCUDAStreams()
	if live != live0 || destroyed != destroyed0+1 || dev != 1 {
		t.Fatalf("after Close: %d streams live (%d before), %d destroyed (%d before), on device %d; want the stream destroyed once on device 1",
			live, live0, destroyed, destroyed0, dev)
	}
	if !d.Closed() || d.cuda != nil {
		t.Fatalf("Closed %v, C struct %p: want closed and freed", d.Closed(), d.cuda)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, again, _ := fakeCUDAStreams(); again != destroyed {
		t.Fatalf("a second Close destroyed %d more streams", again-destroyed)
	}
	if err := d.Copy(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), len(src)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a copy after Close: %v, want refused", err)
	}
	// 100 open/close cycles leave no stream behind.
	for range 100 {
		d, err := newFakeCUDADevAPI(0)
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	if live, _, _, _ := fakeCUDAStreams(); live != live0 {
		t.Fatalf("after 100 cycles %d streams live, want %d", live, live0)
	}
}
