package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

func connect(t *testing.T, addr, id, user, pass string) (mqtt.Client, error) {
	t.Helper()
	o := mqtt.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetConnectTimeout(2 * time.Second).SetAutoReconnect(false)
	if user != "" {
		o.SetUsername(user).SetPassword(pass)
	}
	c := mqtt.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(3 * time.Second) {
		t.Fatal("connect timed out")
	}
	return c, tok.Error()
}

func TestStartValidates(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{
		{Listen: "127.0.0.1:0"},
		{Listen: "nonsense", AllowAnonymous: true},
		{Listen: "127.0.0.1:0", Users: []User{{Username: "a"}}},
		{Listen: "127.0.0.1:0", Users: []User{{Username: "a", Password: "x"}, {Username: "a", Password: "y"}}},
	} {
		if b, err := Start(ctx, o); err == nil {
			b.Close()
			t.Errorf("options %+v accepted", o)
		}
	}
}

func TestAuthAndRoundTripWithPaho(t *testing.T) {
	b, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", Users: []User{{Username: "veh", Password: "pw"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.HasPrefix(b.Addr(), "127.0.0.1:") {
		t.Fatalf("listening on %s, want loopback", b.Addr())
	}
	for _, c := range []struct{ user, pass string }{{"", ""}, {"veh", "nope"}, {"other", "pw"}} {
		if cl, err := connect(t, b.Addr(), "bad", c.user, c.pass); err == nil {
			cl.Disconnect(0)
			t.Errorf("user %q password %q accepted", c.user, c.pass)
		}
	}
	sub, err := connect(t, b.Addr(), "sub", "veh", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Disconnect(0)
	got := make(chan string, 1)
	if tok := sub.Subscribe("a/b", 1, func(_ mqtt.Client, m mqtt.Message) { got <- string(m.Payload()) }); !tok.WaitTimeout(2*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	pub, err := connect(t, b.Addr(), "pub", "veh", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect(0)
	if tok := pub.Publish("a/b", 1, false, "hello"); !tok.WaitTimeout(2*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	select {
	case m := <-got:
		if m != "hello" {
			t.Fatalf("got %q", m)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("message not delivered")
	}
}

func TestAnonymousOnlyWhenAllowed(t *testing.T) {
	b, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", AllowAnonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := connect(t, b.Addr(), "anon", "", "")
	if err != nil {
		t.Fatalf("anonymous refused although allowed: %v", err)
	}
	cl.Disconnect(0)
}
