package camera_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluenviron/gortsplib/v4"
	"github.com/bluenviron/gortsplib/v4/pkg/description"
	"github.com/bluenviron/gortsplib/v4/pkg/format"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/camera/rtspserver"
)

// eventLog records supervisor events.
type eventLog struct {
	mu     sync.Mutex
	events []camera.Event
	ch     chan camera.Event
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan camera.Event, 1024)} }

func (l *eventLog) add(e camera.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	select {
	case l.ch <- e:
	default:
	}
}

func (l *eventLog) count(k camera.EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// waitFor returns the next event of kind k within d.
func (l *eventLog) waitFor(t *testing.T, k camera.EventKind, d time.Duration) camera.Event {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-l.ch:
			if e.Kind == k {
				return e
			}
		case <-deadline:
			t.Fatalf("no %v event within %v", k, d)
		}
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestReconnectAfterServerRestarts kills and restarts the server 50 times:
// every time the client resumes within the backoff cap (plus connection
// set-up), reports exactly one fault and one recovery, and neither
// goroutines nor the heap grow.
func TestReconnectAfterServerRestarts(t *testing.T) {
	const restarts = 50
	const backoffMax = 200 * time.Millisecond
	const setupSlack = 800 * time.Millisecond
	srv := startServer(t, map[string]rtspserver.Generated{"sim": {Source: pattern{64, 32}, FPS: 50}})
	events := newEventLog()
	src, err := camera.NewRTSPSource(camera.RTSPConfig{
		URL:          "rtsp://user:secret@" + srv.Addr() + "/sim",
		BackoffMin:   20 * time.Millisecond,
		BackoffMax:   backoffMax,
		StallTimeout: 2 * time.Second,
		OnEvent:      events.add,
		Logger:       quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	runSource(t, src)
	var fr camera.Frame
	if err := nextFrame(t, src, &fr, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var goroutines0 int
	var heap0 uint64
	var worst time.Duration
	for i := 0; i < restarts; i++ {
		if i == 1 { // measure after one full cycle has warmed every pool
			goroutines0, heap0 = runtime.NumGoroutine(), heapAfterGC()
		}
		srv.Close()
		if err := srv.Start(); err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
		restarted := time.Now()
		deadline := restarted.Add(backoffMax + setupSlack)
		for {
			if err := nextFrame(t, src, &fr, time.Until(deadline)); err != nil {
				t.Fatalf("restart %d: %v (stats %+v)", i, err, src.Stats())
			}
			if fr.Capture.After(restarted) {
				break
			}
		}
		worst = max(worst, time.Since(restarted))
	}
	// Let the last session settle before counting.
	time.Sleep(100 * time.Millisecond)
	if got := events.count(camera.EventFault); got != restarts {
		t.Errorf("%d fault events, want %d (one per outage)", got, restarts)
	}
	if got := events.count(camera.EventRecovered); got != restarts {
		t.Errorf("%d recovered events, want %d", got, restarts)
	}
	events.mu.Lock()
	for _, e := range events.events {
		if strings.Contains(e.Reason, "secret") || strings.Contains(e.SourceID, "secret") {
			t.Errorf("event leaks the password: %+v", e)
		}
	}
	events.mu.Unlock()
	g1, h1 := runtime.NumGoroutine(), heapAfterGC()
	if g1 > goroutines0+4 {
		t.Errorf("goroutines grew from %d to %d over %d restarts", goroutines0, g1, restarts)
	}
	if h1 > heap0+8<<20 {
		t.Errorf("heap grew from %d to %d bytes over %d restarts", heap0, h1, restarts)
	}
	t.Logf("worst resume %v; goroutines %d -> %d; heap %d -> %d KiB; stats %+v",
		worst, goroutines0, g1, heap0>>10, h1>>10, src.Stats())
}

// garbagePeer accepts TCP connections on 127.0.0.1 and answers every request
// with reply(cseq).
func garbagePeer(t *testing.T, reply func(cseq string) []byte) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				r := bufio.NewReader(c)
				for {
					cseq := ""
					for {
						line, err := r.ReadString('\n')
						if err != nil {
							return
						}
						line = strings.TrimSpace(line)
						if line == "" {
							break
						}
						if v, ok := strings.CutPrefix(line, "CSeq:"); ok {
							cseq = strings.TrimSpace(v)
						}
					}
					if _, err := c.Write(reply(cseq)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestGarbagePeer: peers that answer nonsense produce a fault event with a
// clear reason, never a panic or a hang.
func TestGarbagePeer(t *testing.T) {
	noise := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x00, 0x0d, 0x0a}, 300)
	cases := []struct {
		name  string
		reply func(cseq string) []byte
		want  string
	}{
		{"binary noise", func(string) []byte { return noise }, "describe"},
		{"http server", func(string) []byte { return []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi") }, "describe"},
		{"bad sdp", func(cseq string) []byte {
			body := "v=0\r\nthis is not an sdp\r\n"
			return []byte(fmt.Sprintf("RTSP/1.0 200 OK\r\nCSeq: %s\r\nPublic: DESCRIBE, SETUP, PLAY\r\nContent-Type: application/sdp\r\nContent-Length: %d\r\n\r\n%s", cseq, len(body), body))
		}, "describe"},
		{"no video track", func(cseq string) []byte {
			body := "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\nm=audio 0 RTP/AVP 0\r\na=control:trackID=0\r\n"
			return []byte(fmt.Sprintf("RTSP/1.0 200 OK\r\nCSeq: %s\r\nPublic: DESCRIBE, SETUP, PLAY\r\nContent-Type: application/sdp\r\nContent-Length: %d\r\n\r\n%s", cseq, len(body), body))
		}, "no H264, H265 or MJPEG video track"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := garbagePeer(t, tc.reply)
			events := newEventLog()
			src, err := camera.NewRTSPSource(camera.RTSPConfig{
				URL: "rtsp://admin:hunter2@" + addr + "/cam", RequestTimeout: time.Second,
				BackoffMin: 50 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
				OnEvent: events.add, Logger: quietLogger(),
			})
			if err != nil {
				t.Fatal(err)
			}
			runSource(t, src)
			e := events.waitFor(t, camera.EventFault, 5*time.Second)
			if !strings.Contains(e.Reason, tc.want) || !strings.Contains(e.Reason, addr) {
				t.Errorf("fault reason %q does not name %q and the peer %s", e.Reason, tc.want, addr)
			}
			t.Logf("fault reason: %s", e.Reason)
			if strings.Contains(e.Reason, "hunter2") {
				t.Errorf("reason leaks the password: %q", e.Reason)
			}
			if src.Stats().Frames != 0 {
				t.Errorf("garbage produced frames: %+v", src.Stats())
			}
		})
	}
}

// publishMJPEG connects a publisher to url and returns a function that
// sends n black 64x32 M-JPEG frames at about 30 fps, so that a test controls
// exactly when frames flow.
func publishMJPEG(t *testing.T, url string) func(ctx context.Context, n int) error {
	t.Helper()
	f := &format.MJPEG{}
	medi := &description.Media{Type: description.MediaTypeVideo, Formats: []format.Format{f}}
	tcp := gortsplib.TransportTCP
	c := &gortsplib.Client{Transport: &tcp}
	if err := c.StartRecording(url, &description.Session{Medias: []*description.Media{medi}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	enc, err := f.CreateEncoder()
	if err != nil {
		t.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 64, 32))
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	var ts uint32
	return func(ctx context.Context, n int) error {
		for i := 0; i < n && ctx.Err() == nil; i++ {
			pkts, err := enc.Encode(buf.Bytes())
			if err != nil {
				return err
			}
			ts += 3000
			for _, p := range pkts {
				p.Timestamp = ts
				if err := c.WritePacketRTP(medi, p); err != nil {
					return err
				}
			}
			time.Sleep(33 * time.Millisecond)
		}
		return nil
	}
}

// TestWatchdogFiresOnStall: a publisher that stays connected but stops
// sending frames makes the client report a fault naming the watchdog, and a
// recovery once frames flow again.
func TestWatchdogFiresOnStall(t *testing.T) {
	srv := startServer(t, nil)
	url := "rtsp://" + srv.Addr() + "/stall"
	publish := publishMJPEG(t, url)
	ctx := context.Background()
	send := func(n int) {
		t.Helper()
		if err := publish(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	send(1)
	events := newEventLog()
	src, err := camera.NewRTSPSource(camera.RTSPConfig{
		URL: url, StallTimeout: 300 * time.Millisecond,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		OnEvent: events.add, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	runSource(t, src)
	events.waitFor(t, camera.EventConnected, 5*time.Second)
	send(10) // frames flow, then stop: the publisher stays connected
	var fr camera.Frame
	if err := nextFrame(t, src, &fr, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	stalledAt := time.Now()
	e := events.waitFor(t, camera.EventFault, 3*time.Second)
	if !strings.Contains(e.Reason, "no frame for") || !strings.Contains(e.Reason, "watchdog 300ms") {
		t.Errorf("fault reason %q does not name the watchdog", e.Reason)
	}
	if d := time.Since(stalledAt); d < 250*time.Millisecond {
		t.Errorf("fault after %v, before the 300ms watchdog could expire", d)
	}
	if src.Stats().Stalls == 0 {
		t.Errorf("stall not counted: %+v", src.Stats())
	}
	// Frames flow again from another goroutine; the test waits for it.
	sendCtx, stopSending := context.WithCancel(ctx)
	sent := make(chan error, 1)
	go func() { sent <- publish(sendCtx, 60) }()
	defer func() {
		stopSending()
		if err := <-sent; err != nil {
			t.Error(err)
		}
	}()
	events.waitFor(t, camera.EventRecovered, 5*time.Second)
	nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := src.Next(nctx, &fr); err != nil {
		t.Fatalf("no frame after recovery: %v", err)
	}
}

// TestFirstConnectRetried: a camera that is not up yet is a fault, retried
// with backoff until it appears, then connected and recovered, in order.
func TestFirstConnectRetried(t *testing.T) {
	addr := freeAddr(t)
	events := newEventLog()
	src, err := camera.NewRTSPSource(camera.RTSPConfig{
		URL: "rtsp://" + addr + "/sim", BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		OnEvent: events.add, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	runSource(t, src)
	fault := events.waitFor(t, camera.EventFault, 5*time.Second)
	if !strings.Contains(fault.Reason, "connection refused") {
		t.Errorf("fault reason %q, want connection refused", fault.Reason)
	}
	time.Sleep(300 * time.Millisecond) // several retries while nothing listens
	srv, err := rtspserver.New(rtspserver.Config{Addr: addr, Generated: map[string]rtspserver.Generated{"sim": {Source: pattern{64, 32}, FPS: 30}}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	started := time.Now()
	events.waitFor(t, camera.EventConnected, 5*time.Second)
	events.waitFor(t, camera.EventRecovered, 5*time.Second)
	if d := time.Since(started); d > 100*time.Millisecond+time.Second {
		t.Errorf("recovered %v after the server started, beyond the 100ms backoff cap plus set-up", d)
	}
	if st := src.Stats(); st.Failures < 3 || events.count(camera.EventFault) != 1 {
		t.Errorf("stats %+v and %d faults: want several failed attempts reported as one fault", st, events.count(camera.EventFault))
	}
}
