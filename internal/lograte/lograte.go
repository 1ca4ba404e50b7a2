package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is the summary interval used when New gets 0.
const DefaultInterval = 10 * time.Second

// Limiter rate-limits log lines per condition key. It is safe for
// concurrent use. The zero value is not usable; call New.
type Limiter struct {
	log      *slog.Logger
	interval time.Duration

	mu   sync.Mutex
	keys map[string]*condition
}

// condition is the state of one key.
type condition struct {
	level    slog.Level
	msg      string
	args     []any     // of the latest occurrence
	next     time.Time // end of the current window
	repeated int       // occurrences suppressed in the current window
	timer    *time.Timer
}

// New returns a limiter that writes to log (nil discards) with one line per
// condition per interval (0 means DefaultInterval).
func New(log *slog.Logger, interval time.Duration) *Limiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Limiter{log: log, interval: interval, keys: map[string]*condition{}}
}

// Interval is the summary interval.
func (l *Limiter) Interval() time.Duration { return l.interval }

// Log reports one occurrence of the condition key. The first occurrence
// in a window is logged at once with msg and args; later ones in the same
// window are counted, and when the window ends a line with msg, the latest
// args and "repeated" (the count) is written.
func (l *Limiter) Log(level slog.Level, key, msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	c := l.keys[key]
	if c == nil {
		c = &condition{}
		l.keys[key] = c
	}
	if now.Before(c.next) {
		c.level, c.msg, c.args = level, msg, append(c.args[:0], args...)
		c.repeated++
		if c.timer == nil {
			c.timer = time.AfterFunc(c.next.Sub(now), func() { l.summarize(key) })
		}
		l.mu.Unlock()
		return
	}
	c.next = now.Add(l.interval)
	l.mu.Unlock()
	l.log.Log(context.Background(), level, msg, args...)
}

// Warn is Log at slog.LevelWarn.
func (l *Limiter) Warn(key, msg string, args ...any) { l.Log(slog.LevelWarn, key, msg, args...) }

// Error is Log at slog.LevelError.
func (l *Limiter) Error(key, msg string, args ...any) { l.Log(slog.LevelError, key, msg, args...) }

// summarize writes the summary line of key's window, if it had repeats.
func (l *Limiter) summarize(key string) {
	l.mu.Lock()
	c := l.keys[key]
	c.timer = nil
	n := c.repeated
	if n == 0 {
		l.mu.Unlock()
		return
	}
	c.repeated = 0
	c.next = time.Now().Add(l.interval)
	level, msg := c.level, c.msg
	args := append(append([]any(nil), c.args...), "repeated", n, "interval", l.interval.String())
	l.mu.Unlock()
	l.log.Log(context.Background(), level, msg, args...)
}

// Flush writes the pending summaries now (at shutdown).
func (l *Limiter) Flush() {
	l.mu.Lock()
	var keys []string
	for k, c := range l.keys {
		if c.timer != nil {
			c.timer.Stop()
		}
		if c.repeated > 0 {
			keys = append(keys, k)
		}
	}
	l.mu.Unlock()
	for _, k := range keys {
		l.summarize(k)
	}
}
