package nnbench

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strings"
	"time"
)

//go:embed torch_peer.py
var peerScript string

// peer is a running torch_peer.py.
type peer struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	stderr  *strings.Builder
	version string
}

// startPeer starts the PyTorch peer with python and reads its greeting.
func startPeer(ctx context.Context, python string) (*peer, error) {
	cmd := exec.CommandContext(ctx, python, "-c", peerScript)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &peer{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), stderr: &strings.Builder{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the PyTorch peer %s: %w (Debian's python3-torch: bash scripts/deps.sh)", python, err)
	}
	var hello struct {
		Torch  string `json:"torch"`
		MKLDNN bool   `json:"mkldnn"`
	}
	if err := p.read(&hello); err != nil {
		p.close()
		return nil, fmt.Errorf("the PyTorch peer %s did not start: %w (is python3-torch installed? bash scripts/deps.sh)", python, err)
	}
	p.version = "PyTorch " + hello.Torch
	if hello.MKLDNN {
		p.version += " (oneDNN)"
	}
	return p, nil
}

func (p *peer) read(v any) error {
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("%w; stderr: %s", err, strings.TrimSpace(tail(p.stderr.String(), 2000)))
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(line, &e) == nil && e.Error != "" {
		return errors.New(e.Error)
	}
	return json.Unmarshal(line, v)
}

func (p *peer) request(req any, resp any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write to the PyTorch peer: %w", err)
	}
	return p.read(resp)
}

// time returns PyTorch's seconds per forward + backward step of c.
func (p *peer) time(c Case, threads int, minTime time.Duration) (float64, error) {
	var r struct {
		Sec   float64 `json:"sec"`
		Iters int     `json:"iters"`
	}
	err := p.request(map[string]any{"op": "time", "case": c, "threads": threads, "min_time": minTime.Seconds()}, &r)
	if err == nil && !(r.Sec > 0) {
		err = fmt.Errorf("peer reported %v s per step", r.Sec)
	}
	return r.Sec, err
}

// torchResult is PyTorch's output and gradients for one step.
type torchResult struct{ y, dx, dw, db []float32 }

func (p *peer) check(c Case, x, w, b, dy []float32) (*torchResult, error) {
	req := map[string]any{"op": "check", "case": c, "x": enc(x), "w": enc(w), "dy": enc(dy)}
	if b != nil {
		req["b"] = enc(b)
	}
	var r struct{ Y, DX, DW, DB string }
	if err := p.request(req, &r); err != nil {
		return nil, err
	}
	var out torchResult
	var err error
	for _, f := range []struct {
		dst *[]float32
		s   string
	}{{&out.y, r.Y}, {&out.dx, r.DX}, {&out.dw, r.DW}, {&out.db, r.DB}} {
		if *f.dst, err = dec(f.s); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

func (p *peer) close() {
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

func enc(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func dec(s string) ([]float32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		return nil, fmt.Errorf("bad array from the PyTorch peer (%d bytes): %v", len(b), err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
