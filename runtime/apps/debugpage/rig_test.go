package debugpage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
	"github.com/didoedge/didoedge/runtime/stream"
)

// testRuntime writes dir/rt.yaml, a run config over the seeded test
// models (testmodels.Write into dir) with one front camera on an alert
// grid of rows x cols, the embedded broker on a free port and an outbox
// in dir; alertsExtra is added to the alerts section (indented lines),
// tail after it (http:, domain: sections). It returns the loaded config.
func testRuntime(t *testing.T, dir string, rows, cols int, alertsExtra, tail string) *runconfig.Config {
	t.Helper()
	testmodels.Write(t, dir)
	text := `camera: {url: "rtsp://127.0.0.1:1/unused"}
` + testmodels.RuntimeConfig + fmt.Sprintf(`alerts:
  vehicle: v
  camera: front
  grid: {rows: %d, cols: %d}
`, rows, cols) + alertsExtra + `  mqtt: {broker: embedded, client_id: c}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
` + tail
	path := filepath.Join(dir, "rt.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := runconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startPipeline runs cfg's pipeline on a mailbox camera until the test
// ends (the cleanup cancels it and waits for Run to return).
func startPipeline(t *testing.T, cfg *runconfig.Config) (context.Context, *stream.Pipeline, *camera.Mailbox) {
	t.Helper()
	mb := camera.NewMailbox()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := stream.New(ctx, cfg, stream.Options{Source: mb})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx, p, mb
}

// feedFrames publishes w x h synthetic frames into mb every interval
// until ctx ends: byte i of frame seq is i*mul + seq (mod 256), so that
// every frame differs.
func feedFrames(ctx context.Context, mb *camera.Mailbox, w, h, mul int, every time.Duration) {
	go func() {
		f := camera.Frame{Width: w, Height: h}
		for seq := uint64(1); ctx.Err() == nil; seq++ {
			f.RGB = make([]uint8, 3*w*h)
			for i := range f.RGB {
				f.RGB[i] = uint8(i*mul + int(seq))
			}
			f.Seq, f.Capture = seq, time.Now()
			mb.Publish(&f)
			time.Sleep(every)
		}
	}()
}
