package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// DefaultListen is the address used when Options.Listen is empty: the
// loopback interface only, so that nothing off the vehicle can connect by
// accident.
const DefaultListen = "127.0.0.1:1883"

// User is one account of the broker.
type User struct {
	Username, Password string
}

// Options configure the broker.
type Options struct {
	// Listen is host:port; port 0 picks a free port (see Broker.Addr).
	Listen string
	// Users may connect with their password.
	Users []User
	// AllowAnonymous lets clients without username and password in.
	AllowAnonymous bool
	Logger         *slog.Logger
}

// Broker is a running embedded broker.
type Broker struct {
	server *mqtt.Server
	tcp    *listeners.TCP
}

// Start validates the options and starts serving. The broker runs until
// Close is called.
func Start(ctx context.Context, opts Options) (*Broker, error) {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if _, _, err := net.SplitHostPort(opts.Listen); err != nil {
		return nil, fmt.Errorf("start broker: listen %q: %w", opts.Listen, err)
	}
	if len(opts.Users) == 0 && !opts.AllowAnonymous {
		return nil, errors.New("start broker: no users and anonymous access not allowed: nobody could connect")
	}
	hook := &authHook{anonymous: opts.AllowAnonymous, users: map[string][32]byte{}}
	for i, u := range opts.Users {
		if u.Username == "" || u.Password == "" {
			return nil, fmt.Errorf("start broker: users[%d]: username and password are required", i)
		}
		if _, dup := hook.users[u.Username]; dup {
			return nil, fmt.Errorf("start broker: users[%d]: duplicate username %q", i, u.Username)
		}
		hook.users[u.Username] = sha256.Sum256([]byte(u.Password))
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Without the default capabilities every client is refused as "server busy".
	server := mqtt.New(&mqtt.Options{Capabilities: mqtt.NewDefaultServerCapabilities(), Logger: log})
	if err := server.AddHook(hook, nil); err != nil {
		return nil, fmt.Errorf("start broker: %w", err)
	}
	tcp := listeners.NewTCP(listeners.Config{Type: "tcp", ID: "tcp", Address: opts.Listen})
	if err := server.AddListener(tcp); err != nil {
		return nil, fmt.Errorf("start broker: listen %s: %w", opts.Listen, err)
	}
	if err := ctx.Err(); err != nil {
		server.Close()
		return nil, err
	}
	if err := server.Serve(); err != nil {
		server.Close()
		return nil, fmt.Errorf("start broker: %w", err)
	}
	return &Broker{server: server, tcp: tcp}, nil
}

// Addr is the address the broker listens on.
func (b *Broker) Addr() string { return b.tcp.Address() }

// Close stops the broker and disconnects its clients.
func (b *Broker) Close() error { return b.server.Close() }

// authHook checks usernames and passwords in constant time and allows
// every topic to authenticated clients.
type authHook struct {
	mqtt.HookBase
	anonymous bool
	users     map[string][32]byte
}

func (h *authHook) ID() string { return "didoedge-auth" }

func (h *authHook) Provides(b byte) bool {
	return bytes.Contains([]byte{mqtt.OnConnectAuthenticate, mqtt.OnACLCheck}, []byte{b})
}

func (h *authHook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	user, pass := pk.Connect.Username, pk.Connect.Password
	if len(user) == 0 && len(pass) == 0 {
		return h.anonymous
	}
	want, ok := h.users[string(user)]
	got := sha256.Sum256(pass)
	return ok && subtle.ConstantTimeCompare(want[:], got[:]) == 1
}

func (h *authHook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool { return true }
