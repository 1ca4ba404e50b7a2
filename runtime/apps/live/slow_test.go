package live

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/stream"
)

const oneCamera = `camera: {url: "rtsp://127.0.0.1:1/unused"}
` + testmodels.RuntimeConfig + `alerts:
  vehicle: v
  camera: front
  calibration: quiet.yaml
  grid: {rows: 1, cols: 2}
  mqtt: {broker: embedded, client_id: c}
  outbox: {dir: outbox}
  embedded: {listen: "127.0.0.1:0", allow_anonymous: true}
http: {listen: "off"}
live: {listen: "127.0.0.1:0", queue: 8}
`

// dialSubscribeAll connects a raw Foxglove client (gorilla), reads the
// server info and advertise, and subscribes to every channel; it returns
// the connection, which the caller may then stop reading.
func dialSubscribeAll(t *testing.T, addr string, rcvbuf int) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{Subprotocol}, HandshakeTimeout: 5 * time.Second,
		NetDialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, a)
			if err == nil && rcvbuf > 0 {
				c.(*net.TCPConn).SetReadBuffer(rcvbuf)
			}
			return c, err
		}}
	conn, _, err := d.Dial("ws://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var subs []subscription
	for len(subs) == 0 {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, data, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Op       string   `json:"op"`
			Channels []advert `json:"channels"`
		}
		json.Unmarshal(data, &m)
		for i, ch := range m.Channels {
			subs = append(subs, subscription{ID: uint32(i), ChannelID: ch.ID})
		}
	}
	if err := conn.WriteJSON(map[string]any{"op": "subscribe", "subscriptions": subs}); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestSlowClientDoesNotSlowPipeline: a client that subscribes to every
// channel and then stops reading (a stalled network) fills its own queue
// and loses its own messages (counted); the pipeline keeps its rate
// (within 10 % of the rate without a client: the camera paces it), and a
// second client that reads keeps getting frames meanwhile.
func TestSlowClientDoesNotSlowPipeline(t *testing.T) {
	const fps = 30
	r := startRig(t, oneCamera, fps)
	waitFrames(t, r, 10)
	rate := func(d time.Duration) float64 {
		for len(r.frames) > 0 {
			<-r.frames
		}
		time.Sleep(d)
		return float64(len(r.frames)) / d.Seconds()
	}
	base := rate(3 * time.Second)

	slow := dialSubscribeAll(t, r.srv.Addr(), 4096)
	_ = slow // never read again
	fast := dialSubscribeAll(t, r.srv.Addr(), 0)
	got := make(chan int, 1)
	go func() {
		n := 0
		defer func() { got <- n }()
		for {
			fast.SetReadDeadline(time.Now().Add(10 * time.Second))
			typ, _, err := fast.ReadMessage()
			if err != nil {
				return
			}
			if typ == websocket.BinaryMessage {
				n++
			}
		}
	}()
	// Wait (bounded) until the slow client's queue overflowed: the kernel's
	// socket buffers fill first.
	t0 := time.Now()
	for len(r.frames) > 0 {
		<-r.frames
	}
	deadline := time.Now().Add(60 * time.Second)
	for r.srv.Stats().Dropped == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the slow client lost nothing in 60 s: %+v", r.srv.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
	during := rate(3 * time.Second)
	elapsed := time.Since(t0)
	st := r.srv.Stats()
	fast.Close()
	n := <-got
	t.Logf("pipeline %.1f fps without a client, %.1f fps with a stalled and a reading client; overflow after %v; stats %+v; reading client got %d messages",
		base, during, elapsed.Round(time.Millisecond), st, n)
	if during < 0.9*base {
		t.Errorf("pipeline slowed down: %.1f fps with the stalled client, %.1f without", during, base)
	}
	if st.FramesDropped > st.FramesIn/10 {
		t.Errorf("encoder dropped %d of %d frames", st.FramesDropped, st.FramesIn)
	}
	// The reading client kept up: every frame stream of every frame the
	// encoder took, less what it lost itself (nothing, it reads).
	if n < int(elapsed.Seconds()*fps*0.5) {
		t.Errorf("the reading client got %d messages in %v", n, elapsed)
	}
}

// BenchmarkFrameNoClient: one frame through every stage of the pipeline
// (test models) with the live view attached and listening but no client:
// 0 allocations per frame (-benchmem), as without the live view.
func BenchmarkFrameNoClient(b *testing.B) {
	r := buildRig(b, oneCamera) // not running: Process drives the frames
	f := testFrame()
	ctx := context.Background()
	r.p.Process(ctx, 0, f)
	b.ReportAllocs()
	for b.Loop() {
		f.Seq++
		f.Capture = time.Now()
		r.p.Process(ctx, 0, f)
	}
	if r.srv.Stats().FramesIn != 0 {
		b.Fatalf("frames handed to the live view without a client: %+v", r.srv.Stats())
	}
}

// TestFrameNoClientAllocatesNothing is the benchmark's claim as a test:
// with the live view attached and no client, a frame allocates nothing
// and nothing is handed over; the hand-over to a subscribed live view
// (the copy into a slot) allocates nothing either.
func TestFrameNoClientAllocatesNothing(t *testing.T) {
	r := buildRig(t, oneCamera)
	f := testFrame()
	ctx := context.Background()
	r.p.Process(ctx, 0, f)
	allocs := func() float64 {
		a := 1e9
		for range 3 { // other goroutines only add: the least run is the frame's
			a = min(a, testing.AllocsPerRun(20, func() { f.Seq++; r.p.Process(ctx, 0, f) }))
		}
		return a
	}
	if a := allocs(); a != 0 {
		t.Fatalf("%v allocations per frame with the live view and no client", a)
	}
	if st := r.srv.Stats(); st.FramesIn != 0 {
		t.Fatalf("frames handed over without a client: %+v", st)
	}
	// Subscribed: the hand-over copies into a warm slot without
	// allocating (the encoder's work is on its own goroutine).
	cc := (*r.srv.cams.Load())["front"]
	cc.subs[sDepth].Add(1)
	defer cc.subs[sDepth].Add(-1)
	tf := &stream.TapFrame{Camera: "front", Width: 64, Height: 32, RGB: f.RGB}
	tf.Maps.Width, tf.Maps.Height = 64, 32
	tf.Maps.Depth = make([]float32, 64*32)
	sl := &slot{}
	sl.fill(cc, tf)
	if a := testing.AllocsPerRun(20, func() { sl.fill(cc, tf) }); a != 0 {
		t.Fatalf("slot fill: %v allocations", a)
	}
}
