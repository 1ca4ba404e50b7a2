//go:build !amd64

package nnbench

import "runtime"

func isaName() string {
	if runtime.GOARCH == "arm64" {
		return "NEON"
	}
	return "no vector kernels"
}
