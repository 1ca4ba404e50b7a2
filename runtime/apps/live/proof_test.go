package live

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/didoedge/didoedge/runtime/runconfig"
)

// TestWebSocketChangeNeedsProof: Foxglove's own client
// (@foxglove/ws-protocol) sets /events/exit_inertia over the WebSocket
// with the Origin header a browser page sends. A page of this machine
// (http://127.0.0.1:3000) or of Foxglove's web app changed the vehicle
// without a token before; now a connection with an Origin changes it only
// with the token in the URL (as Foxglove passes it) or from an origin in
// live.allowed_origins; a refusal is a status error naming the missing
// proof, the values in force in the reply, one refusal counted, nothing
// applied. Clients without an Origin (not a browser) keep changing it.
func TestWebSocketChangeNeedsProof(t *testing.T) {
	r := startRig(t, twoCameras, 10)
	waitFrames(t, r, 2)
	const token = "proof-token-0123456789"
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Two more listeners on the same control: one that lists Foxglove's
	// web app, one with a token.
	listen := func(lc runconfig.LiveConfig) string {
		t.Helper()
		if err := lc.Finish("live"); err != nil {
			t.Fatal(err)
		}
		s, err := Listen(context.Background(), lc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.Attach(r.p.Cameras(), r.ctl)
		return "ws://" + s.Addr() + "/"
	}
	open := "ws://" + r.srv.Addr() + "/"
	listed := listen(runconfig.LiveConfig{Listen: "127.0.0.1:0", AllowedOrigins: []string{"https://app.foxglove.dev"}})
	withToken := listen(runconfig.LiveConfig{Listen: "127.0.0.1:0", TokenFile: tokFile})

	exitInertia := func() float64 {
		ps, err := r.ctl.GetParameters([]string{"/events/exit_inertia"})
		if err != nil || len(ps) != 1 {
			t.Fatalf("parameters: %v %v", ps, err)
		}
		return ps[0].Value.(float64)
	}
	const localPage, foxgloveApp = "http://127.0.0.1:3000", "https://app.foxglove.dev"
	for _, c := range []struct {
		name, url, origin string
		value             float64 // set; 0: refused
	}{
		{"a page of this machine, no token", open, localPage, 0},
		{"Foxglove's web app, not listed", open, foxgloveApp, 0},
		{"a native client (no Origin)", open, "", 3},
		{"Foxglove's web app, listed", listed, foxgloveApp, 4},
		{"a page of this machine, another origin listed", listed, localPage, 0},
		{"a page of this machine, token in the URL", withToken + "?token=" + token, localPage, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, applied, refused := exitInertia(), r.ctl.Applied(), r.ctl.Refused()
			set := c.value
			if set == 0 {
				set = 7
			}
			args := []string{"--seconds", "1.5", "--topics", "^$", "--set", "/events/exit_inertia=" + strconv.FormatFloat(set, 'g', -1, 64)}
			if c.origin != "" {
				args = append(args, "--origin", c.origin)
			}
			rep := foxglove(t, c.url, args...)
			if len(rep.Errors) > 0 {
				t.Fatalf("client errors: %v", rep.Errors)
			}
			got := exitInertia()
			if c.value == 0 {
				if len(rep.Statuses) != 1 || rep.Statuses[0].Level != 2 ||
					!strings.Contains(rep.Statuses[0].Message, `setParameters refused: this connection (Origin "`+c.origin+`") may only read`) ||
					!strings.Contains(rep.Statuses[0].Message, "?token=TOKEN") || !strings.Contains(rep.Statuses[0].Message, "live.allowed_origins") {
					t.Errorf("statuses %+v, want one error naming the missing proof", rep.Statuses)
				}
				if v := param(rep.SetReply, "/events/exit_inertia"); v != before {
					t.Errorf("reply %v, want the value in force %v", rep.SetReply, before)
				}
				if got != before || r.ctl.Applied() != applied || r.ctl.Refused() != refused+1 {
					t.Errorf("exit_inertia %v (was %v), applied +%d, refused +%d; want unchanged, +0, +1",
						got, before, r.ctl.Applied()-applied, r.ctl.Refused()-refused)
				}
				if rep.ServerInfo.Metadata["control"] != "false" || rep.ServerInfo.Metadata["read_only"] == "" {
					t.Errorf("serverInfo metadata %v, want control false and the reason", rep.ServerInfo.Metadata)
				}
				return
			}
			if len(rep.Statuses) != 0 || param(rep.SetReply, "/events/exit_inertia") != c.value || got != c.value ||
				r.ctl.Applied() != applied+1 || r.ctl.Refused() != refused {
				t.Errorf("statuses %+v, reply %v, exit_inertia %v, applied +%d, refused +%d; want %v applied once",
					rep.Statuses, rep.SetReply, got, r.ctl.Applied()-applied, r.ctl.Refused()-refused, c.value)
			}
			if rep.ServerInfo.Metadata["control"] != "true" {
				t.Errorf("serverInfo metadata %v, want control true", rep.ServerInfo.Metadata)
			}
		})
	}
	// The other ops that would act on the vehicle (client channels,
	// client publish as a binary message) are refused the same way on a
	// read-only connection, before "not supported".
	h := http.Header{"Origin": {localPage}}
	d := websocket.Dialer{Subprotocols: []string{Subprotocol}, HandshakeTimeout: 5 * time.Second}
	conn, _, err := d.Dial(open, h)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.WriteMessage(websocket.TextMessage, []byte(`{"op":"advertise","channels":[{"id":1,"topic":"/cmd","encoding":"json","schemaName":"x"}]}`))
	conn.WriteMessage(websocket.BinaryMessage, []byte{0x01, 1, 0, 0, 0, '{', '}'})
	var refusals []string
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(refusals) < 2 {
		var m struct{ Op, Message string }
		if err := conn.ReadJSON(&m); err != nil {
			t.Fatalf("reading the answers: %v (refusals so far %q)", err, refusals)
		}
		if m.Op == "status" {
			refusals = append(refusals, m.Message)
		}
	}
	if !strings.HasPrefix(refusals[0], "advertise refused: this connection") || !strings.HasPrefix(refusals[1], "binary client message refused: this connection") {
		t.Errorf("answers %q, want advertise and the client publish refused for want of the proof", refusals)
	}

	// Without the token that listener refuses the connection itself.
	rep := foxglove(t, withToken, "--seconds", "1", "--origin", localPage)
	if rep.ServerInfo.Name != "" || len(rep.Errors) == 0 {
		t.Errorf("a connection without the token: serverInfo %+v, errors %v; want refused", rep.ServerInfo, rep.Errors)
	}
}
