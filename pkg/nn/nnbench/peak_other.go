//go:build !amd64 && !arm64

package nnbench

const haveFMA = false

const flopsPerIter = 1

func fmaLoop(n int) {}
