package broker

// Opening the store when its file may be damaged: a SIGKILL during a
// write, a power loss on a card without power-loss protection, a
// truncation, an overwrite. bbolt has no checksums on its data pages and
// answers some damage with a panic (assertion failed: Page expected to be:
// 19; invalid freelist page), others with an error (invalid database). A
// damaged store must never stop the broker, hence the runtime, from
// starting: it is moved aside with a timestamp, a fresh one takes its
// place with every entry that could still be read and decoded (sessions
// with their subscriptions and queued messages, retained messages), and
// what was carried and what lost is logged at ERROR and counted.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"go.etcd.io/bbolt"
)

// storeInventory is what a store holds, as far as it could be read.
type storeInventory struct {
	clients       []string       // client ids with a stored session
	subscriptions int            // stored subscriptions
	retained      int            // retained messages
	queued        map[string]int // queued and in-flight messages by client
	queuedTotal   int

	// entries are the entries that decoded, copied out of the mapped
	// file, in key order: what a fresh store can take over.
	entries []storeEntry
	// undecodable counts entries read that did not decode.
	undecodable int
	// complete: every entry of the bucket was reached (the damage, if
	// any, lies in a value or outside the data: the free list, the
	// write-open). Otherwise the walk stopped at the damage and what
	// lay beyond it is unknown.
	complete bool
}

// storeEntry is one decoded entry: its key, its value and the client it
// belongs to (sessions, subscriptions and queued messages; "" for a
// retained message).
type storeEntry struct {
	k, v   []byte
	client string
}

// carried is what a fresh store took over from a damaged one, and what
// of the readable part it could not: subscriptions and queued messages
// whose client's session did not decode (the broker restores a client's
// subscriptions and queue only with its session).
type carried struct {
	inv     storeInventory // the entries taken over, counted as the inventory counts
	orphans int
	err     error // the fresh store refused the copy: nothing was carried
}

func (inv storeInventory) countAttrs(prefix string) []any {
	sort.Strings(inv.clients)
	per := make([]string, 0, len(inv.queued))
	for id, n := range inv.queued {
		per = append(per, fmt.Sprintf("%s=%d", id, n))
	}
	sort.Strings(per)
	return []any{prefix + "_sessions", len(inv.clients), prefix + "_session_ids", strings.Join(inv.clients, ","),
		prefix + "_subscriptions", inv.subscriptions, prefix + "_queued_messages", inv.queuedTotal,
		prefix + "_queued_by_client", strings.Join(per, ","), prefix + "_retained", inv.retained}
}

// logAttrs says what was carried over and what was lost: the readable
// entries not carried (undecodable, orphaned, or all of them when the
// copy failed) and, when the walk stopped at the damage, that the rest
// is unknown.
func (c carried) logAttrs(read storeInventory) []any {
	attrs := c.inv.countAttrs("carried")
	lost := read.undecodable + c.orphans
	if c.err != nil {
		lost += len(read.entries)
		attrs = append(attrs, "carry_error", c.err.Error())
	}
	attrs = append(attrs, "lost_entries", lost, "read_complete", read.complete)
	if !read.complete {
		attrs = append(attrs, "lost_beyond_damage", "unknown (the store could not be read past the damage)")
	}
	return attrs
}

// carryOver writes the readable sessions, their subscriptions and queued
// messages, and the retained messages into the fresh store db, in one
// transaction.
func carryOver(db *bbolt.DB, read storeInventory) carried {
	sessions := map[string]bool{}
	for _, e := range read.entries {
		if bytes.HasPrefix(e.k, []byte(keyClient)) {
			sessions[e.client] = true
		}
	}
	var c carried
	c.inv.queued = map[string]int{}
	err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketName)
		if err != nil {
			return err
		}
		for _, e := range read.entries {
			isRetained := bytes.HasPrefix(e.k, []byte(keyRetained))
			if !isRetained && !sessions[e.client] {
				c.orphans++
				continue
			}
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
			c.inv.count(e)
		}
		return nil
	})
	if err != nil {
		return carried{err: err}
	}
	return c
}

// count adds a decoded entry to the inventory's counts.
func (inv *storeInventory) count(e storeEntry) {
	switch {
	case bytes.HasPrefix(e.k, []byte(keyClient)):
		inv.clients = append(inv.clients, e.client)
	case bytes.HasPrefix(e.k, []byte(keySub)):
		inv.subscriptions++
	case bytes.HasPrefix(e.k, []byte(keyRetained)):
		inv.retained++
	case bytes.HasPrefix(e.k, []byte(keyInflight)):
		inv.queued[e.client]++
		inv.queuedTotal++
	}
}

// openStoreFile opens the store at path, replacing a damaged or emptied
// one with a fresh store. damaged reports that the file was replaced (or
// found empty); the error is only for what a fresh store cannot cure: a
// store another process holds open, a directory that cannot be written.
func openStoreFile(path string, log *slog.Logger, now time.Time) (db *bbolt.DB, damaged bool, err error) {
	st, statErr := os.Lstat(path)
	switch {
	case errors.Is(statErr, os.ErrNotExist):
		log.Info("mqtt broker: no store yet, starting a new one", "path", path)
		db, err := openBolt(path)
		return db, false, err
	case statErr != nil:
		return nil, false, fmt.Errorf("store %s: %w", path, statErr)
	case !st.Mode().IsRegular():
		return nil, false, fmt.Errorf("store %s: not a regular file (%s)", path, st.Mode().Type())
	case st.Size() == 0:
		// bbolt writes its four first pages as it creates a file: an
		// empty store was truncated (or its first write never landed).
		// Whatever it held cannot be known.
		log.Error("mqtt broker: the store is empty (zero bytes): every stored session and queued message, if any, is lost; starting a new one",
			"path", path, "lost", "unknown (the file was truncated to 0)")
		db, err := openBolt(path)
		return db, true, err
	}
	db, inv, damage := openChecked(path)
	if damage == nil {
		return db, false, nil
	}
	var to *timeoutError
	if errors.As(damage, &to) {
		return nil, false, fmt.Errorf("store %s: %w (is another broker running on this store?)", path, to.err)
	}
	aside := fmt.Sprintf("%s.damaged-%s", path, now.UTC().Format("20060102T150405.000000000Z"))
	if err := os.Rename(path, aside); err != nil {
		return nil, false, fmt.Errorf("store %s is damaged (%v) and cannot be moved aside: %w", path, damage, err)
	}
	if db, err = openBolt(path); err != nil {
		return nil, true, err
	}
	// What could be read goes into the fresh store; only the rest is lost.
	c := carryOver(db, inv)
	attrs := append([]any{"path", path, "moved_to", aside, "damage", damage.Error()}, c.logAttrs(inv)...)
	log.Error("mqtt broker: the store is damaged: moved aside, starting a new one with what could be read of it", attrs...)
	return db, true, nil
}

// timeoutError is bbolt's lock timeout: another process has the store.
type timeoutError struct{ err error }

func (e *timeoutError) Error() string { return e.err.Error() }

// openBolt opens (or creates) the store; the timeout makes a second
// process on the same file fail instead of waiting for the lock forever.
func openBolt(path string) (*bbolt.DB, error) {
	db, err := bbolt.Open(path, 0o640, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return db, nil
}

// openChecked opens the store read-only first and reads all of it: every
// page reachable from the bucket and every value decoded as the broker
// will decode it at start (the inventory). Then it opens it for writing,
// which loads the free list. Any error or panic on the way is the damage
// returned, with the inventory of what was read. bbolt's own tx.Check is
// not used: it walks the pages in a goroutine of its own, where a panic
// on a damaged page cannot be recovered and would end the process.
func openChecked(path string) (db *bbolt.DB, inv storeInventory, damage error) {
	inv.queued = map[string]int{}
	if damage = inventory(path, &inv); damage != nil {
		return nil, inv, damage
	}
	db, damage = openRecovered(path, bbolt.Options{Timeout: time.Second})
	if damage != nil {
		return nil, inv, damage
	}
	return db, inv, nil
}

// inventory reads the store read-only into inv.
func inventory(path string, inv *storeInventory) error {
	db, err := openRecovered(path, bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer closeQuietly(db)
	return recovered(func() error {
		return db.View(func(tx *bbolt.Tx) error {
			b := tx.Bucket(bucketName)
			if b == nil {
				inv.complete = true
				return nil // a store whose first transaction did not land
			}
			// Every entry is read, so that the inventory holds all that
			// can be read; the first bad one is the damage.
			var first error
			err := b.ForEach(func(k, v []byte) error {
				if err := inv.add(k, v); err != nil {
					inv.undecodable++
					if first == nil {
						first = err
					}
				}
				return nil
			})
			inv.complete = err == nil
			return errors.Join(err, first)
		})
	})
}

// openRecovered is bbolt.Open with a panic as an error and the lock
// timeout as a *timeoutError. Open's own cleanup runs on a returned
// error only: after a panic inside it (loading a damaged free list) its
// descriptor, with the lock on it, and its mapping of the file would
// stay for the life of the process. The descriptor is caught as bbolt
// opens it (Options.OpenFile) and closed; the mapping is removed
// (releaseMappings).
func openRecovered(path string, o bbolt.Options) (db *bbolt.DB, err error) {
	var f *os.File
	o.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		file, err := os.OpenFile(name, flag, mode)
		f = file
		return file, err
	}
	err = recovered(func() error {
		db, err = bbolt.Open(path, 0o640, &o)
		return err
	})
	if db == nil && f != nil {
		if panicked(err) {
			releaseMappings(f)
			f.Close()
		}
	}
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, &timeoutError{err}
	}
	return db, err
}

// errPanicked marks the error of a recovered panic.
var errPanicked = errors.New("bbolt panicked")

func panicked(err error) bool { return errors.Is(err, errPanicked) }

// recovered runs fn with a panic, or a memory fault of the mapped file
// (a truncated file is mapped past its end, where a read faults: SIGBUS),
// returned as an error instead of ending the process.
func recovered(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanicked, r)
		}
	}()
	return fn()
}

// add decodes one entry of the store as StoredClients, StoredSubscriptions,
// StoredRetainedMessages and StoredInflightMessages will, and keeps a
// copy of it (k and v live in the mapped file only during the read).
func (inv *storeInventory) add(k, v []byte) error {
	e := storeEntry{k: bytes.Clone(k), v: bytes.Clone(v)}
	switch {
	case bytes.HasPrefix(k, []byte(keyClient)):
		var c storage.Client
		if err := c.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("session %q: %w", k[len(keyClient):], err)
		}
		e.client = c.ID
	case bytes.HasPrefix(k, []byte(keySub)):
		var s storage.Subscription
		if err := s.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("subscription %q: %w", k[len(keySub):], err)
		}
		e.client = s.Client
	case bytes.HasPrefix(k, []byte(keyRetained)):
		var m storage.Message
		if err := m.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("retained message %q: %w", k[len(keyRetained):], err)
		}
	case bytes.HasPrefix(k, []byte(keyInflight)):
		if len(k) != len(keyInflight)+8 {
			return fmt.Errorf("queued message key of %d bytes", len(k))
		}
		var m storage.Message
		if err := m.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("queued message %d: %w", binary.BigEndian.Uint64(k[len(keyInflight):]), err)
		}
		e.client = m.Client
	default:
		return fmt.Errorf("unknown key of %d bytes", len(k))
	}
	inv.count(e)
	inv.entries = append(inv.entries, e)
	return nil
}

func closeQuietly(db *bbolt.DB) {
	defer func() { _ = recover() }()
	_ = db.Close()
}
