package nnbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"gorgonia.org/tensor"

	"github.com/didoedge/didoedge/pkg/nn"
)

// Case is one layer shape. Op is "conv" (Conv2d with bias), "linear" (Linear)
// or "cosine" (CosineSimilarity on feature maps).
type Case struct {
	Name   string `json:"name"`
	Op     string `json:"op"`
	N      int    `json:"n"`
	In     int    `json:"in"`
	Out    int    `json:"out"`
	H      int    `json:"h"`
	W      int    `json:"w"`
	K      int    `json:"k"`
	Stride int    `json:"stride"`
	Pad    int    `json:"pad"`
	Dil    int    `json:"dil"`
}

// Flops is the work of one forward + backward step: three GEMM-sized products
// (output, input gradient, weight gradient) of 2·N·Out·In·K²·Ho·Wo flops for a
// convolution, 2·N·Out·In for Linear and 2·N·Out·In·H·W for the cosine layer
// (its norms are not counted: both sides compute them).
func (c Case) Flops() float64 {
	switch c.Op {
	case "conv":
		ho, wo := c.outSize()
		return 6 * float64(c.N*c.Out*c.In*c.K*c.K) * float64(ho*wo)
	case "linear":
		return 6 * float64(c.N*c.Out*c.In)
	default:
		return 6 * float64(c.N*c.Out*c.In) * float64(c.H*c.W)
	}
}

func (c Case) outSize() (int, int) {
	cfg := nn.Conv2dConfig{Kernel: c.K, Stride: c.Stride, Padding: c.Pad, Dilation: c.Dil}
	return cfg.OutputSize(c.H, c.W)
}

func (c Case) validate() error {
	bad := c.N < 1 || c.In < 1 || c.Out < 1
	switch c.Op {
	case "conv":
		bad = bad || c.H < 1 || c.W < 1 || c.K < 1 || c.Stride < 1 || c.Dil < 1 || c.Pad < 0
	case "cosine":
		bad = bad || c.H < 1 || c.W < 1
	case "linear":
	default:
		return fmt.Errorf("case %q: unknown op %q (conv, linear, cosine)", c.Name, c.Op)
	}
	if bad {
		return fmt.Errorf("case %q: sizes must be positive: %+v", c.Name, c)
	}
	return nil
}

// DefaultCases are the shapes of the issue (3x3, 32 and 64 channels at
// 48x160, batch 4: a decoder stage at a quarter of 192x640), then the layers
// that dominate the protocol's trainings: the depth network's largest
// convolutions (192x256 crops, batch 4; a stride-2 encoder layer), the
// AuxUE's 8-channel convolutions on the 48x160 grid (batch 2), its DIDO
// cosine layer (40 -> 8 channels per pixel, with 4-band global context), and
// a Linear layer of the tabular AuxUE (1599 rows, 16 -> 300).
func DefaultCases() []Case {
	conv := func(name string, n, in, out, h, w, k, s, p, d int) Case {
		return Case{Name: name, Op: "conv", N: n, In: in, Out: out, H: h, W: w, K: k, Stride: s, Pad: p, Dil: d}
	}
	return []Case{
		conv("conv3x3 32->32 48x160 b4", 4, 32, 32, 48, 160, 3, 1, 1, 1),
		conv("conv3x3 64->64 48x160 b4", 4, 64, 64, 48, 160, 3, 1, 1, 1),
		conv("depth dec1 40->16 96x128 b4", 4, 40, 16, 96, 128, 3, 1, 1, 1),
		conv("depth enc1 s2 4->16 192x256 b4", 4, 4, 16, 192, 256, 3, 2, 1, 1),
		conv("auxue 8->8 d2 48x160 b2", 2, 8, 8, 48, 160, 3, 1, 2, 2),
		{Name: "auxue cosine 40->8 48x160 b2", Op: "cosine", N: 2, In: 40, Out: 8, H: 48, W: 160},
		{Name: "tabular linear 16->300 n1599", Op: "linear", N: 1599, In: 16, Out: 300},
	}
}

// Options configures Run. Zero values take the defaults in brackets.
type Options struct {
	Cases   []Case        // [DefaultCases]
	Threads []int         // [1, 2]
	Rounds  int           // interleaved rounds per case and thread count [5]
	MinTime time.Duration // per measurement [300 ms]
	Python  string        // interpreter with torch [/usr/bin/python3]
	Log     *slog.Logger  // progress [discarded]
}

// Row is one case at one thread count. GFLOP/s figures are medians over the
// rounds; the fractions are of the FMA peak at the same thread count.
type Row struct {
	Case       Case      `json:"case"`
	Threads    int       `json:"threads"`
	GoGFLOPS   float64   `json:"go_gflops"`
	TorchGFLOP float64   `json:"torch_gflops"`
	Ratio      float64   `json:"ratio"`
	GoPeak     float64   `json:"go_fraction_of_peak"`
	TorchPeak  float64   `json:"torch_fraction_of_peak"`
	GoRounds   []float64 `json:"go_rounds"`
	TorchRound []float64 `json:"torch_rounds"`
	// MaxRelErr is the largest difference between Go's and PyTorch's
	// outputs and gradients on the case's data, relative to the largest
	// magnitude of the compared array.
	MaxRelErr float64 `json:"max_rel_err"`
}

// Report is the result of Run.
type Report struct {
	CPU     string          `json:"cpu"`
	ISA     string          `json:"isa"` // vector extensions the CPU reports
	GoArch  string          `json:"goarch"`
	Kernel  string          `json:"kernel"`
	Torch   string          `json:"torch"`
	Peak    map[int]float64 `json:"peak_gflops"` // by thread count
	Rounds  int             `json:"rounds"`
	MinTime string          `json:"min_time"`
	Rows    []Row           `json:"rows"`
}

// checkTol bounds MaxRelErr: float32 sums of up to a few thousand products
// in different orders.
const checkTol = 1e-4

// Run checks and times every case at every thread count (see the package
// comment). It sets GOMAXPROCS to each thread count in turn and restores it.
func Run(ctx context.Context, o Options) (*Report, error) {
	if len(o.Cases) == 0 {
		o.Cases = DefaultCases()
	}
	if len(o.Threads) == 0 {
		o.Threads = []int{1, 2}
	}
	if o.Rounds <= 0 {
		o.Rounds = 5
	}
	if o.MinTime <= 0 {
		o.MinTime = 300 * time.Millisecond
	}
	if o.Python == "" {
		o.Python = "/usr/bin/python3"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	for _, c := range o.Cases {
		if err := c.validate(); err != nil {
			return nil, err
		}
	}
	for _, t := range o.Threads {
		if t < 1 {
			return nil, fmt.Errorf("thread count %d must be positive", t)
		}
	}
	if !haveFMA {
		return nil, errors.New("bench kernels: no vector FMA loop for this CPU (amd64 AVX2+FMA or arm64 only): no peak to compare with")
	}
	peer, err := startPeer(ctx, o.Python)
	if err != nil {
		return nil, err
	}
	defer peer.close()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))

	r := &Report{CPU: cpuName(), ISA: isaName(), GoArch: runtime.GOARCH, Kernel: nn.KernelName(), Torch: peer.version,
		Peak: map[int]float64{}, Rounds: o.Rounds, MinTime: o.MinTime.String()}
	for _, t := range o.Threads {
		r.Peak[t] = Peak(t, o.MinTime)
		o.Log.Info("fma peak", "threads", t, "gflops", fmt.Sprintf("%.1f", r.Peak[t]))
	}
	type slot struct {
		row  Row
		step func() error
	}
	var slots []*slot
	for _, c := range o.Cases {
		for ti, t := range o.Threads {
			runtime.GOMAXPROCS(t) // the layers size their worker pools from it
			step, layer, data, err := newGoStep(c)
			if err != nil {
				return nil, err
			}
			s := &slot{row: Row{Case: c, Threads: t}, step: step}
			if ti == 0 {
				if s.row.MaxRelErr, err = checkAgainstTorch(peer, c, layer, data); err != nil {
					return nil, err
				}
				o.Log.Info("checked against torch", "case", c.Name, "max_rel_err", s.row.MaxRelErr)
				if s.row.MaxRelErr > checkTol {
					return nil, fmt.Errorf("case %q: Go and PyTorch differ by %.3g (relative), more than %g", c.Name, s.row.MaxRelErr, checkTol)
				}
			} else {
				s.row.MaxRelErr = slots[len(slots)-1].row.MaxRelErr
			}
			slots = append(slots, s)
		}
	}
	for round := 0; round < o.Rounds; round++ {
		for _, s := range slots {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			runtime.GOMAXPROCS(s.row.Threads)
			sec, err := timeGo(s.step, o.MinTime)
			if err != nil {
				return nil, fmt.Errorf("case %q: %w", s.row.Case.Name, err)
			}
			tsec, err := peer.time(s.row.Case, s.row.Threads, o.MinTime)
			if err != nil {
				return nil, fmt.Errorf("case %q: torch: %w", s.row.Case.Name, err)
			}
			f := s.row.Case.Flops() / 1e9
			s.row.GoRounds = append(s.row.GoRounds, f/sec)
			s.row.TorchRound = append(s.row.TorchRound, f/tsec)
			o.Log.Info("round", "n", round+1, "case", s.row.Case.Name, "threads", s.row.Threads,
				"go", fmt.Sprintf("%.1f", f/sec), "torch", fmt.Sprintf("%.1f", f/tsec))
		}
	}
	for _, s := range slots {
		row := s.row
		row.GoGFLOPS, row.TorchGFLOP = median(row.GoRounds), median(row.TorchRound)
		row.Ratio = row.GoGFLOPS / row.TorchGFLOP
		if p := r.Peak[row.Threads]; p > 0 {
			row.GoPeak, row.TorchPeak = row.GoGFLOPS/p, row.TorchGFLOP/p
		}
		r.Rows = append(r.Rows, row)
	}
	return r, nil
}

// Peak measures the FMA throughput of threads goroutines, each locked to its
// own OS thread, over about d, in GFLOP/s; the best of three runs.
func Peak(threads int, d time.Duration) float64 {
	if !haveFMA || threads < 1 {
		return 0
	}
	prev := runtime.GOMAXPROCS(threads)
	defer runtime.GOMAXPROCS(prev)
	// Calibrate the iteration count to about d/3 per run on one thread.
	n := 1 << 16
	for {
		t0 := time.Now()
		fmaLoop(n)
		if el := time.Since(t0); el > 20*time.Millisecond {
			n = int(float64(n) * float64(d/3) / float64(el))
			break
		}
		n *= 4
	}
	best := 0.0
	for range 3 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				<-start
				fmaLoop(n)
			}()
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		el := time.Since(t0).Seconds()
		best = max(best, float64(threads)*float64(n)*flopsPerIter/el/1e9)
	}
	return best
}

func timeGo(step func() error, minTime time.Duration) (float64, error) {
	for range 2 { // warm-up: buffers, worker pools, caches
		if err := step(); err != nil {
			return 0, err
		}
	}
	iters, t0 := 0, time.Now()
	for {
		if err := step(); err != nil {
			return 0, err
		}
		iters++
		if el := time.Since(t0); el >= minTime {
			return el.Seconds() / float64(iters), nil
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// stepData is a case's input and output gradient.
type stepData struct{ x, dy *tensor.Dense }

// newGoStep builds the case's layer with seeded weights, uniform data in
// [-1, 1) and returns its forward + backward step.
func newGoStep(c Case) (func() error, nn.Layer, *stepData, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	var layer nn.Layer
	var xShape []int
	switch c.Op {
	case "conv":
		l, err := nn.NewConv2d(nn.Conv2dConfig{In: c.In, Out: c.Out, Kernel: c.K, Stride: c.Stride, Padding: c.Pad, Dilation: c.Dil, Bias: true}, rng)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("case %q: %w", c.Name, err)
		}
		layer, xShape = l, []int{c.N, c.In, c.H, c.W}
	case "linear":
		layer, xShape = nn.NewLinear(c.In, c.Out, rng), []int{c.N, c.In}
	case "cosine":
		layer, xShape = nn.NewCosineSimilarity(c.In, c.Out, rng), []int{c.N, c.In, c.H, c.W}
	}
	for _, p := range layer.Params() {
		fill(rng, nn.Data(p.Value))
	}
	x := nn.NewDense(xShape...)
	fill(rng, nn.Data(x))
	y, err := layer.Forward(x, nn.Train)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("case %q: %w", c.Name, err)
	}
	dy := nn.NewDense(y.Shape()...)
	fill(rng, nn.Data(dy))
	step := func() error {
		if _, err := layer.Forward(x, nn.Train); err != nil {
			return err
		}
		_, err := layer.Backward(dy)
		return err
	}
	return step, layer, &stepData{x: x, dy: dy}, nil
}

func fill(rng *rand.Rand, s []float32) {
	for i := range s {
		s[i] = rng.Float32()*2 - 1
	}
}

// checkAgainstTorch runs one Go step from zero gradients and the same step
// in PyTorch on the same weights and data, and returns the largest relative
// difference of the output, input gradient and parameter gradients.
func checkAgainstTorch(p *peer, c Case, layer nn.Layer, d *stepData) (float64, error) {
	params := layer.Params()
	nn.ZeroGrad(params)
	y, err := layer.Forward(d.x, nn.Train)
	if err != nil {
		return 0, fmt.Errorf("case %q: %w", c.Name, err)
	}
	dx, err := layer.Backward(d.dy)
	if err != nil {
		return 0, fmt.Errorf("case %q: %w", c.Name, err)
	}
	var bias []float32
	if len(params) > 1 {
		bias = nn.Data(params[1].Value)
	}
	ref, err := p.check(c, nn.Data(d.x), nn.Data(params[0].Value), bias, nn.Data(d.dy))
	if err != nil {
		return 0, fmt.Errorf("case %q: torch: %w", c.Name, err)
	}
	worst := 0.0
	cmp := func(what string, got, want []float32) error {
		if len(got) != len(want) {
			return fmt.Errorf("case %q: %s has %d values in Go, %d in torch", c.Name, what, len(got), len(want))
		}
		scale := 0.0
		for _, v := range want {
			scale = max(scale, math.Abs(float64(v)))
		}
		for i := range got {
			worst = max(worst, math.Abs(float64(got[i])-float64(want[i]))/max(scale, 1e-30))
		}
		return nil
	}
	if err := errors.Join(cmp("y", nn.Data(y), ref.y), cmp("dx", nn.Data(dx), ref.dx),
		cmp("dw", nn.Data(params[0].Grad), ref.dw)); err != nil {
		return 0, err
	}
	if bias != nil {
		if err := cmp("db", nn.Data(params[1].Grad), ref.db); err != nil {
			return 0, err
		}
	}
	return worst, nil
}

// cpuName is the model name in /proc/cpuinfo, or GOARCH where there is none.
func cpuName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// WriteTable prints the report as a table.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "bench kernels: Go (pkg/nn, %s, %s) vs %s on %s (%s)\n", r.Kernel, r.GoArch, r.Torch, r.CPU, r.ISA)
	fmt.Fprintf(&b, "one forward + backward step per measurement (%s each), median of %d interleaved rounds\n", r.MinTime, r.Rounds)
	var ts []int
	for t := range r.Peak {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	b.WriteString("FMA peak (register-only vector FMA loop):")
	for _, t := range ts {
		fmt.Fprintf(&b, "  %d thread(s) %.1f GFLOP/s", t, r.Peak[t])
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "%-34s %7s %10s %10s %8s %8s %8s %9s\n", "case", "threads", "Go GF/s", "torch GF/s", "Go/torch", "Go/peak", "tc/peak", "max diff")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "%-34s %7d %10.1f %10.1f %8.2f %8.2f %8.2f %9.1e\n", row.Case.Name, row.Threads,
			row.GoGFLOPS, row.TorchGFLOP, row.Ratio, row.GoPeak, row.TorchPeak, row.MaxRelErr)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
