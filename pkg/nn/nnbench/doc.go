// Package nnbench measures the training kernels of pkg/nn against PyTorch
// on the same CPU: `didoedge bench kernels`. For every case (a convolution,
// Linear or CosineSimilarity layer of the AuxUE and depth networks) and thread
// count it first checks that Go and PyTorch compute the same forward pass
// and gradients on the same data, then times one forward + backward step of
// each, alternating Go and PyTorch round by round so that both see the same
// machine load, and reports GFLOP/s, their ratio and the fraction of the
// machine's FMA peak, which it measures with a loop of independent vector
// FMAs (peak_amd64.s, peak_arm64.s).
//
// PyTorch is a real peer, not a reference table: Debian's python3-torch run by
// /usr/bin/python3 (scripts/deps.sh installs it), driven over stdin/stdout by
// torch_peer.py, which is embedded in the binary.
package nnbench
