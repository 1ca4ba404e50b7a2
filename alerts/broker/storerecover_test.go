package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"go.etcd.io/bbolt"
)

// logBuffer is a log sink the broker's goroutines and the test share.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON log records with msg containing part.
func (s *logBuffer) records(part string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(s.b.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && strings.Contains(fmt.Sprint(r["msg"]), part) {
			out = append(out, r)
		}
	}
	return out
}

const queuedEvents = 24

// populate leaves in dir the store of a broker that was stopped while a
// persistent subscriber ("sub", subscribed to didoedge/#) was away with
// 24 QoS 1 events queued for it. Every store write is committed (fsynced)
// before Publish returns, so the file is what a SIGKILL leaves after
// those writes.
func populate(t *testing.T, dir string) {
	t.Helper()
	b := startStore(t, "127.0.0.1:0", dir, StoreSettings{})
	sub := connectPersistent(t, b.Addr(), "sub", true)
	sub.c.Disconnect(100)
	waitGone(t, b, "sub")
	for _, p := range payloads("new", 1, queuedEvents) {
		if err := b.Publish(testEvents, []byte(p), false, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.Stats().Store.Messages; n != queuedEvents {
		t.Fatalf("store holds %d messages, want %d", n, queuedEvents)
	}
	b.Close()
}

// freelistPage finds the store's free-list page.
func freelistPage(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bbolt.Open(path, 0o640, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id int64 = -1
	db.View(func(tx *bbolt.Tx) error {
		for i := 2; i < int(tx.Size()/int64(os.Getpagesize())); i++ {
			if p, err := tx.Page(i); err == nil && p != nil && p.Type == "freelist" {
				id = int64(i)
				break
			}
		}
		return nil
	})
	if id < 0 {
		t.Fatal("no free-list page in the store")
	}
	return id
}

func overwrite(t *testing.T, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestDamagedStoreStarts: each damage the issue found stopped every start
// (a panic, or an error that blamed another broker) or lost the queue
// without a word. Now the broker starts, the damaged file is moved aside
// with a timestamp, what could still be read (sessions, their
// subscriptions and queued messages, retained messages) is carried into
// the fresh store, what was carried and what lost is logged at ERROR and
// the damage counted; the returning subscriber subscribes again (SUBACK
// granted) and gets the carried queue in publish order, then new events.
func TestDamagedStoreStarts(t *testing.T) {
	page := int64(os.Getpagesize())
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		// wantCarried: the queued messages carried over, when the damage
		// leaves them readable (-1: as far as the walk got, read from the
		// ERROR line); wantLost the entries read but not carried.
		wantCarried, wantLost int
		empty                 bool // the zero-length message, no file moved aside
	}{
		{"random bytes over every data page", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			overwrite(t, path, 2*page, randomBytes(19, int(st.Size()-2*page)))
		}, -1, -1, false},
		{"random bytes over the free list", func(t *testing.T, path string) {
			overwrite(t, path, freelistPage(t, path)*page, randomBytes(7, int(page)))
		}, queuedEvents, 0, false},
		{"truncated mid-page", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			if err := os.Truncate(path, st.Size()/2+100); err != nil {
				t.Fatal(err)
			}
		}, -1, -1, false},
		{"zeroed meta pages", func(t *testing.T, path string) {
			overwrite(t, path, 0, make([]byte, 2*page))
		}, 0, 0, false},
		{"a value that does not decode", func(t *testing.T, path string) {
			db, err := bbolt.Open(path, 0o640, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketName).Put([]byte(keyClient+"x"), []byte("{not json")) })
			db.Close()
		}, queuedEvents, 1, false},
		// sub's own session undecodable: its subscription and queue cannot
		// be restored without it (orphans), so all 26 entries are lost.
		{"the subscriber's session does not decode", func(t *testing.T, path string) {
			db, err := bbolt.Open(path, 0o640, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(tx *bbolt.Tx) error {
				return tx.Bucket(bucketName).Put([]byte(keyClient+"sub"), []byte("{not json"))
			})
			db.Close()
		}, 0, 1 + 1 + queuedEvents, false},
		{"truncated to 0", func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}, 0, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			populate(t, dir)
			path := filepath.Join(dir, StoreFile)
			tc.damage(t, path)
			var logs logBuffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			b, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", AllowAnonymous: true, AnonymousRead: []string{"didoedge/#"},
				Store: StoreSettings{Dir: dir}, Logger: log})
			if err != nil {
				t.Fatalf("start on the damaged store: %v", err)
			}
			defer b.Close()
			if n := b.Stats().Store.Damaged; n != 1 {
				t.Fatalf("Stats().Store.Damaged = %d, want 1", n)
			}
			aside, _ := filepath.Glob(path + ".damaged-*")
			queued := 0 // carried over, delivered before the new event
			if tc.empty {
				recs := logs.records("the store is empty")
				if len(recs) != 1 || recs[0]["level"] != "ERROR" || len(aside) != 0 {
					t.Fatalf("empty store: records %v, files moved aside %v; want one ERROR, none moved", recs, aside)
				}
			} else {
				recs := logs.records("the store is damaged")
				if len(recs) != 1 || recs[0]["level"] != "ERROR" {
					t.Fatalf("damage logged as %v, want one ERROR line", recs)
				}
				r := recs[0]
				if len(aside) != 1 || r["moved_to"] != aside[0] || r["damage"] == "" {
					t.Fatalf("moved aside %v, logged %v", aside, r)
				}
				carriedN := -1
				if n, ok := r["carried_queued_messages"].(float64); ok {
					carriedN = int(n)
				}
				if tc.wantCarried >= 0 && carriedN != tc.wantCarried {
					t.Fatalf("carried %v queued messages, want %d: %v", r["carried_queued_messages"], tc.wantCarried, r)
				}
				if tc.wantLost >= 0 && r["lost_entries"] != float64(tc.wantLost) {
					t.Fatalf("lost_entries %v, want %d: %v", r["lost_entries"], tc.wantLost, r)
				}
				if tc.wantCarried == queuedEvents {
					// Everything of sub's was readable: its session and its
					// subscription go over with the queue; the walk was whole.
					if r["carried_sessions"] != float64(1) || r["carried_session_ids"] != "sub" || r["carried_subscriptions"] != float64(1) ||
						r["carried_queued_by_client"] != fmt.Sprintf("sub=%d", queuedEvents) || r["read_complete"] != true {
						t.Fatalf("carried %v, want sub's session, subscription and %d queued", r, queuedEvents)
					}
				}
				if carriedN < 0 || carriedN > queuedEvents {
					t.Fatalf("carried_queued_messages %v", r["carried_queued_messages"])
				}
				queued = carriedN
				t.Logf("damage: %v; carried %v queued, %v sessions, lost %v entries, read complete %v",
					r["damage"], r["carried_queued_messages"], r["carried_sessions"], r["lost_entries"], r["read_complete"])
			}
			// The returning subscriber subscribes again and gets the carried
			// part of its queue, the oldest first, then what is published
			// from now on.
			sub := connectPersistent(t, b.Addr(), "sub", true)
			defer sub.c.Disconnect(100)
			if err := b.Publish(testEvents, []byte("after"), false, 1); err != nil {
				t.Fatal(err)
			}
			want := append(payloads("new", 1, queued), "after")
			if got := sub.wait(len(want), 10*time.Second); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("after the restart the subscriber got %q, want the %d carried events, then the new one", got, queued)
			}
		})
	}
}

// A missing store is a new one, said at INFO, not counted as damage; a
// store another broker holds is an error and is not moved aside.
func TestStoreMissingAndHeld(t *testing.T) {
	dir := t.TempDir()
	var logs logBuffer
	b, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", AllowAnonymous: true,
		Store: StoreSettings{Dir: dir}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if recs := logs.records("no store yet"); len(recs) != 1 || recs[0]["level"] != "INFO" || b.Stats().Store.Damaged != 0 {
		t.Fatalf("missing store logged %v, damaged %d", recs, b.Stats().Store.Damaged)
	}
	_, err = Start(context.Background(), Options{Listen: "127.0.0.1:0", AllowAnonymous: true, Store: StoreSettings{Dir: dir}})
	if err == nil || !strings.Contains(err.Error(), "another broker") {
		t.Fatalf("second broker on the store: %v, want the lock refusal", err)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, StoreFile+".damaged-*")); len(aside) != 0 {
		t.Fatalf("a held store was moved aside: %v", aside)
	}
}

// A persistent subscriber returns after a restart to its restored queue
// (24 events, packet ids 1..24) and subscribes again, as most clients do
// on every connect: its SUBACK grants QoS 1 (it was 0x80, failure: the
// SUBSCRIBE's packet id collided with a queued message's), and it gets
// its queue, then new events.
func TestResubscribeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	populate(t, dir)
	b := startStore(t, "127.0.0.1:0", dir, StoreSettings{})
	defer b.Close()
	s := connectPersistent(t, b.Addr(), "sub", false)
	defer s.c.Disconnect(100)
	for i := range 3 {
		tok := s.c.Subscribe("didoedge/#", 1, nil)
		if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("subscribe %d: %v", i, tok.Error())
		}
		if code := tok.(*mqtt.SubscribeToken).Result()["didoedge/#"]; code != 1 {
			t.Fatalf("subscribe %d after the restart: SUBACK code %#x, want 0x01 (QoS 1 granted)", i, code)
		}
	}
	want := payloads("new", 1, queuedEvents)
	got := s.wait(queuedEvents, 10*time.Second)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %q, want the %d queued events in order", got, queuedEvents)
	}
	if err := b.Publish(testEvents, []byte("after"), false, 1); err != nil {
		t.Fatal(err)
	}
	if got := s.wait(queuedEvents+1, 5*time.Second); len(got) != queuedEvents+1 || got[queuedEvents] != "after" {
		t.Fatalf("got %d messages, last %q; want the new event after the queue", len(got), got[len(got)-1])
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestPanicInOpenLeaksNothing: bbolt panics inside Open on a damaged
// free list ("invalid freelist page"), after it opened, locked and mapped
// the file; Open's cleanup runs on a returned error only. The recovered
// path closes the descriptor (the lock goes with it) and unmaps the file:
// the descriptors counted in /proc/self/fd and the file's mappings in
// /proc/self/maps are what they were before, after each of 5 opens.
func TestPanicInOpenLeaksNothing(t *testing.T) {
	dir := t.TempDir()
	populate(t, dir)
	path := filepath.Join(dir, StoreFile)
	overwrite(t, path, freelistPage(t, path)*int64(os.Getpagesize()), randomBytes(7, os.Getpagesize()))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	before := openFDs(t)
	for i := range 5 {
		db, err := openRecovered(path, bbolt.Options{Timeout: time.Second})
		if db != nil || !panicked(err) {
			t.Fatalf("open %d of the damaged store: %v, %v; want bbolt's panic as an error", i, db, err)
		}
		if n := openFDs(t); n != before {
			t.Fatalf("after open %d (%v): %d descriptors, %d before", i, err, n, before)
		}
		if m := mappingsOf(uint64(sys.Dev), sys.Ino); len(m) != 0 {
			t.Fatalf("after open %d: the store is still mapped at %x", i, m)
		}
	}
	// The lock went with the descriptor: a writer gets it at once.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	db, err := openRecovered(path, bbolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("open after the panics: %v (the lock was left behind?)", err)
	}
	db.Close()
}
