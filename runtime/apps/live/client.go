package live

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/didoedge/didoedge/runtime/service/control"
)

// writeTimeout bounds one message's write: a client that takes longer is
// disconnected (its queue keeps dropping meanwhile).
const writeTimeout = 10 * time.Second

// maxClientMessage bounds what a client may send (JSON requests).
const maxClientMessage = 1 << 20

// opMessageData is the binary Message Data opcode.
const opMessageData = 0x01

// client is one Foxglove connection: a reader goroutine (requests) and a
// writer goroutine draining its bounded queues.
type client struct {
	s      *Server
	conn   *websocket.Conn
	remote string
	q      chan dataMsg // message data, bounded: full means dropped
	ctrl   chan []byte  // JSON messages; full means the client is gone
	done   chan struct{}
	once   sync.Once

	subs    map[uint32]uint32 // subscription id -> channel id (Server.mu)
	dropped atomic.Uint64

	// mayChange: the connection proved it may change the vehicle
	// (Server.changeProof); otherwise readOnly says why not.
	mayChange bool
	readOnly  string
}

type dataMsg struct {
	sub  uint32
	ts   uint64
	data []byte
}

func newClient(s *Server, conn *websocket.Conn, remote string) *client {
	return &client{s: s, conn: conn, remote: remote, q: make(chan dataMsg, s.cfg.Queue), ctrl: make(chan []byte, 64),
		done: make(chan struct{}), subs: map[uint32]uint32{}}
}

func (c *client) hasSub(id uint32) bool { _, ok := c.subs[id]; return ok }

func (c *client) subscribed(channel uint32) bool {
	for _, ch := range c.subs {
		if ch == channel {
			return true
		}
	}
	return false
}

// sendData queues a message for the client, or drops it (counted) when
// its queue is full: a slow client loses its own messages only.
func (c *client) sendData(sub uint32, ts uint64, data []byte) {
	select {
	case c.q <- dataMsg{sub: sub, ts: ts, data: data}:
	default:
		c.dropped.Add(1)
		c.s.dropped.Add(1)
	}
}

// sendJSON queues a JSON message; a client whose control queue is full is
// disconnected (it read nothing for 64 control messages).
func (c *client) sendJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.s.log.Error("live: JSON message", "err", err)
		return
	}
	select {
	case c.ctrl <- b:
	default:
		c.close()
	}
}

func (c *client) status(level int, msg string) {
	c.sendJSON(map[string]any{"op": "status", "level": level, "message": msg})
}

func (c *client) close() {
	c.once.Do(func() {
		close(c.done)
		c.conn.Close()
	})
}

// run serves the client until its connection ends.
func (c *client) run() {
	var wg sync.WaitGroup
	wg.Go(c.write)
	c.read()
	c.close()
	wg.Wait()
}

// write sends the queued messages, JSON ones first.
func (c *client) write() {
	var hdr [13]byte
	hdr[0] = opMessageData
	for {
		var (
			text []byte
			m    dataMsg
		)
		select {
		case text = <-c.ctrl:
		default:
			select {
			case text = <-c.ctrl:
			case m = <-c.q:
			case <-c.done:
				return
			}
		}
		c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		if text != nil {
			if err := c.conn.WriteMessage(websocket.TextMessage, text); err != nil {
				c.close()
				return
			}
			continue
		}
		binary.LittleEndian.PutUint32(hdr[1:], m.sub)
		binary.LittleEndian.PutUint64(hdr[5:], m.ts)
		w, err := c.conn.NextWriter(websocket.BinaryMessage)
		if err == nil {
			if _, err = w.Write(hdr[:]); err == nil {
				_, err = w.Write(m.data)
			}
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			c.close()
			return
		}
		c.s.sent.Add(1)
	}
}

// subscription is one entry of a subscribe request.
type subscription struct {
	ID        uint32 `json:"id"`
	ChannelID uint32 `json:"channelId"`
}

// request is a client's JSON message (the ops this server supports).
type request struct {
	Op              string              `json:"op"`
	Subscriptions   []subscription      `json:"subscriptions"`
	SubscriptionIDs []uint32            `json:"subscriptionIds"`
	ParameterNames  []string            `json:"parameterNames"`
	Parameters      []control.Parameter `json:"parameters"`
	ID              *string             `json:"id"`
}

// read handles the client's requests until the connection ends.
func (c *client) read() {
	c.conn.SetReadLimit(maxClientMessage)
	for {
		typ, data, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		if typ != websocket.TextMessage {
			// Binary client messages are clientPublish (0x01) and service
			// calls (0x02): both would act on the vehicle.
			if !c.mayChange {
				c.status(2, "binary client message refused: "+c.readOnly)
				continue
			}
			c.status(2, "binary client messages (clientPublish, services) are not supported")
			continue
		}
		var req request
		if err := json.Unmarshal(data, &req); err != nil {
			c.status(2, fmt.Sprintf("request: %v", err))
			continue
		}
		c.handle(&req)
	}
}

// mutating reports whether a client op of foxglove.websocket.v1 acts on
// the vehicle: such ops need Server.changeProof whether this server
// supports them or not, so that adding one later cannot forget the
// check. Reads (subscribe, getParameters, subscribeParameterUpdates,
// fetchAsset, the connection graph) stay open to every connection.
func mutating(op string) bool {
	switch op {
	case "setParameters", "advertise", "unadvertise", "callService":
		return true
	}
	return false
}

func (c *client) handle(req *request) {
	if mutating(req.Op) && !c.mayChange {
		c.refuseChange(req)
		return
	}
	switch req.Op {
	case "subscribe":
		for _, msg := range c.s.subscribe(c, req.Subscriptions) {
			c.status(1, msg)
		}
	case "unsubscribe":
		for _, msg := range c.s.unsubscribe(c, req.SubscriptionIDs) {
			c.status(1, msg)
		}
	case "getParameters":
		ctl := c.s.control()
		if ctl == nil {
			c.status(2, "getParameters: no control attached")
			return
		}
		ps, err := ctl.GetParameters(req.ParameterNames)
		if err != nil {
			c.status(2, "getParameters: "+err.Error())
		}
		c.parameterValues(ps, req.ID)
	case "setParameters":
		ctl := c.s.control()
		if ctl == nil {
			c.status(2, "setParameters: no control attached")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ps, err := ctl.SetParameters(ctx, req.Parameters, "foxglove "+c.remote)
		if err != nil {
			c.status(2, "setParameters refused: "+err.Error())
		}
		c.parameterValues(ps, req.ID)
	default:
		c.status(1, fmt.Sprintf("op %q is not supported by this server", req.Op))
	}
}

// refuseChange answers a change from a connection without the proof:
// one refusal counted, a status error saying what proof is missing, and
// for setParameters the values in force (so that Foxglove shows them,
// not the refused ones).
func (c *client) refuseChange(req *request) {
	msg := req.Op + " refused: " + c.readOnly
	if req.Op != "setParameters" {
		c.status(2, msg)
		return
	}
	ctl := c.s.control()
	if ctl == nil {
		c.status(2, msg)
		return
	}
	names := make([]string, 0, len(req.Parameters))
	for _, p := range req.Parameters {
		names = append(names, p.Name)
	}
	ctl.Refuse("foxglove setParameters", "foxglove "+c.remote, errors.New(c.readOnly))
	c.status(2, msg)
	ps, err := ctl.GetParameters(names)
	if err != nil {
		ps = nil
	}
	c.parameterValues(ps, req.ID)
}

func (c *client) parameterValues(ps []control.Parameter, id *string) {
	msg := map[string]any{"op": "parameterValues", "parameters": ps}
	if id != nil {
		msg["id"] = *id
	}
	c.sendJSON(msg)
}
