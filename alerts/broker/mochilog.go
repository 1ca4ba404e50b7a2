package broker

import (
	"context"
	"log/slog"

	"github.com/didoedge/didoedge/internal/lograte"
)

// mochiHandler adapts mochi-mqtt's log lines: its informational start and
// stop lines go to DEBUG, every message gets a text (mochi logs some with
// an empty one), the attribute "pk" (a whole packet, payload included) is
// dropped, and each message is rate-limited (one line per interval with a
// count), so that a misbehaving client cannot flood the log.
type mochiHandler struct {
	next  slog.Handler
	rl    *lograte.Limiter
	attrs []any
}

func newMochiHandler(log *slog.Logger) slog.Handler {
	return &mochiHandler{next: log.Handler(), rl: lograte.New(log, 0)}
}

func (h *mochiHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return h.next.Enabled(ctx, l)
}

func (h *mochiHandler) Handle(_ context.Context, r slog.Record) error {
	level := r.Level
	if level == slog.LevelInfo {
		level = slog.LevelDebug
	}
	msg := r.Message
	if msg == "" {
		msg = "mqtt broker: client error"
	} else {
		msg = "mqtt broker: " + msg
	}
	args := append([]any(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "pk" {
			args = append(args, a)
		}
		return true
	})
	h.rl.Log(level, msg, msg, args...)
	return nil
}

func (h *mochiHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]any(nil), h.attrs...)
	for _, a := range attrs {
		c.attrs = append(c.attrs, a)
	}
	return &c
}

// WithGroup is not used by mochi; groups are flattened.
func (h *mochiHandler) WithGroup(string) slog.Handler { return h }
