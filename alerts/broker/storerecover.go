package broker

// Opening the store when its file may be damaged: a SIGKILL during a
// write, a power loss on a card without power-loss protection, a
// truncation, an overwrite. bbolt has no checksums on its data pages and
// answers some damage with a panic (assertion failed: Page expected to be:
// 19; invalid freelist page), others with an error (invalid database). A
// damaged store must never stop the broker, hence the runtime, from
// starting: it is moved aside with a timestamp, a fresh one takes its
// place, and what was lost is logged at ERROR and counted.

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
}

func (inv storeInventory) logAttrs() []any {
	sort.Strings(inv.clients)
	per := make([]string, 0, len(inv.queued))
	for id, n := range inv.queued {
		per = append(per, fmt.Sprintf("%s=%d", id, n))
	}
	sort.Strings(per)
	return []any{"lost_sessions", len(inv.clients), "lost_session_ids", strings.Join(inv.clients, ","),
		"lost_subscriptions", inv.subscriptions, "lost_queued_messages", inv.queuedTotal,
		"lost_queued_by_client", strings.Join(per, ","), "lost_retained", inv.retained}
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
	attrs := append([]any{"path", path, "moved_to", aside, "damage", damage.Error()}, inv.logAttrs()...)
	log.Error("mqtt broker: the store is damaged: moved aside, starting a new one; what it held (as far as it could be read) is lost", attrs...)
	db, err = openBolt(path)
	return db, true, err
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
				return nil // a store whose first transaction did not land
			}
			// Every entry is read, so that the inventory counts all that
			// can be read; the first bad one is the damage.
			var first error
			err := b.ForEach(func(k, v []byte) error {
				if err := inv.add(k, v); err != nil && first == nil {
					first = err
				}
				return nil
			})
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
// StoredRetainedMessages and StoredInflightMessages will.
func (inv *storeInventory) add(k, v []byte) error {
	switch {
	case bytes.HasPrefix(k, []byte(keyClient)):
		var c storage.Client
		if err := c.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("session %q: %w", k[len(keyClient):], err)
		}
		inv.clients = append(inv.clients, c.ID)
	case bytes.HasPrefix(k, []byte(keySub)):
		var s storage.Subscription
		if err := s.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("subscription %q: %w", k[len(keySub):], err)
		}
		inv.subscriptions++
	case bytes.HasPrefix(k, []byte(keyRetained)):
		var m storage.Message
		if err := m.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("retained message %q: %w", k[len(keyRetained):], err)
		}
		inv.retained++
	case bytes.HasPrefix(k, []byte(keyInflight)):
		if len(k) != len(keyInflight)+8 {
			return fmt.Errorf("queued message key of %d bytes", len(k))
		}
		var m storage.Message
		if err := m.UnmarshalBinary(v); err != nil {
			return fmt.Errorf("queued message %d: %w", binary.BigEndian.Uint64(k[len(keyInflight):]), err)
		}
		inv.queued[m.Client]++
		inv.queuedTotal++
	default:
		return fmt.Errorf("unknown key of %d bytes", len(k))
	}
	return nil
}

func closeQuietly(db *bbolt.DB) {
	defer func() { _ = recover() }()
	_ = db.Close()
}
