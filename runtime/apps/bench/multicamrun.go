package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// MulticamRun is `didoedge bench multicam`: each camera count and the
// single-session bound run in a child process of their own (Exec), so
// that each RSS is that configuration's alone; the parent prints the
// table.
type MulticamRun struct {
	Options MulticamOptions
	// Counts are the camera counts to measure.
	Counts []int
	// Header is the first line of the report (MulticamHeader).
	Header string
	// Exec builds the child process that measures n cameras (0: the
	// bound) and prints its result as JSON (Child).
	Exec func(ctx context.Context, n int) *exec.Cmd
}

// MulticamHeader describes a run's set-up in one line.
func MulticamHeader(models string, fps float64, duration, warmup time.Duration, pool string, spinning bool) string {
	rate := fmt.Sprintf("%g fps per camera", fps)
	if fps == 0 {
		rate = "free-running cameras"
	}
	threads := "thread_pool " + pool
	if pool == "" {
		threads = "thread_pool global (default)"
	}
	return fmt.Sprintf("bench multicam: models %s, simulated rig (pre-rendered frames, %s, in-process sources), %v per run after %v warm-up, each run in its own process; %s, thread_spinning %t",
		models, rate, duration, warmup, threads, spinning)
}

// Child runs one measurement in this process, n cameras (0: the bound for
// the largest count), and writes it to w as JSON.
func (r MulticamRun) Child(ctx context.Context, n int, w io.Writer) error {
	o := r.Options
	var v any
	var err error
	if n == 0 {
		v, err = InferenceBound(ctx, o, slices.Max(r.Counts))
	} else {
		o.Cameras = n
		v, err = Multicam(ctx, o)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(v)
}

// child runs the child process of n cameras and decodes its result.
func (r MulticamRun) child(ctx context.Context, n int, into any) error {
	cmd := r.Exec(ctx, n)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench multicam child %d: %w: %s", n, err, strings.TrimSpace(errb.String()))
	}
	return json.Unmarshal(out.Bytes(), into)
}

// Run measures the bound and every camera count in child processes and
// writes the table to w.
func (r MulticamRun) Run(ctx context.Context, w io.Writer) error {
	fmt.Fprintln(w, r.Header)
	var bound BoundResult
	if err := r.child(ctx, 0, &bound); err != nil {
		return err
	}
	fmt.Fprintf(w, "single-session bound alone (models back to back on staged frames, %d cameras, batch %d, provider %s): %.2f fps (%v per frame), rss %.1f MiB\n",
		slices.Max(r.Counts), bound.BatchSize, bound.Provider, bound.FPS, bound.MeanTime.Round(time.Microsecond), float64(bound.RSSBytes)/(1<<20))
	fmt.Fprintf(w, "single-session bound: %s\n", copyLine(bound.Copy, bound.Inference))
	fmt.Fprintf(w, "each row: the pipeline and the bound (models back to back on sessions of their own) in %d alternating slices in the same process; /bound = aggregate over that bound\n", r.Options.Slices)
	fmt.Fprintf(w, "%7s %5s %9s %7s %7s %7s %10s %10s %9s %12s %12s  %s\n", "cameras", "batch", "aggregate", "bound", "/bound", "spread", "p50", "p99", "rss MiB",
		"allocs/frame", "less idle", "per camera fps (dropped)")
	var rss1 int64
	for _, n := range r.Counts {
		var res MulticamResult
		if err := r.child(ctx, n, &res); err != nil {
			return err
		}
		if n == 1 {
			rss1 = res.RSSBytes
		}
		var per []string
		for _, c := range res.PerCamera {
			per = append(per, fmt.Sprintf("%s %.2f (%d)", c.Name, c.FPS, c.Dropped))
		}
		fmt.Fprintf(w, "%7d %5d %9.2f %7.2f %7.3f %6.1f%% %10v %10v %9.1f %12.2f %12.2f  %s\n", n, res.BatchSize, res.AggregateFPS,
			res.BoundFPS, res.Ratio, 100*res.Spread,
			res.LatencyP50.Round(time.Microsecond), res.LatencyP99.Round(time.Microsecond), float64(res.RSSBytes)/(1<<20), res.AllocsPerFrame, res.FrameAllocs,
			strings.Join(per, ", "))
		fmt.Fprintf(w, "        idle process allocations (broker $SYS, MQTT, stats; no frames): %.0f/s\n", res.IdleAllocsPerSec)
		if n > 1 && rss1 > 0 {
			fmt.Fprintf(w, "        rss %d cameras / 1 camera: %.3f\n", n, float64(res.RSSBytes)/float64(rss1))
		}
	}
	return nil
}
