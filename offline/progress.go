package offline

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a progress bar with the rate and the time left: redrawn
// in place on a terminal, one line every few seconds otherwise (logs, CI).
type progress struct {
	w        io.Writer
	tty      bool
	what     string
	unit     string
	total    int
	start    time.Time
	last     time.Time
	every    time.Duration
	done     int
	drawn    int // done at the last draw
	finished bool
}

// newProgress starts a bar over total units (frames, steps); w nil draws
// nothing.
func newProgress(w io.Writer, what, unit string, total int) *progress {
	p := &progress{w: w, what: what, unit: unit, total: total, start: time.Now(), every: 10 * time.Second}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty, p.every = true, 200*time.Millisecond
		}
	}
	return p
}

// set records done units and redraws when due; extra is appended (losses).
func (p *progress) set(done int, extra string) {
	if p == nil || p.w == nil {
		return
	}
	p.done = done
	now := time.Now()
	if done < p.total && now.Sub(p.last) < p.every {
		return
	}
	p.last = now
	p.draw(now, extra)
}

// finish draws the final state and ends the line.
func (p *progress) finish(extra string) {
	if p == nil || p.w == nil || p.finished {
		return
	}
	p.finished = true
	if !p.tty && p.drawn == p.done && p.last != (time.Time{}) {
		return // the last line already shows the end
	}
	p.draw(time.Now(), extra)
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

func (p *progress) draw(now time.Time, extra string) {
	const width = 24
	p.drawn = p.done
	frac := 1.0
	if p.total > 0 {
		frac = float64(p.done) / float64(p.total)
	}
	n := int(frac * width)
	bar := strings.Repeat("=", n)
	if n < width {
		bar += ">" + strings.Repeat(" ", width-n-1)
	}
	el := now.Sub(p.start)
	rate := float64(p.done) / el.Seconds()
	eta := "?"
	if p.done > 0 && p.done < p.total {
		eta = (time.Duration(float64(p.total-p.done) / rate * float64(time.Second))).Round(time.Second).String()
	} else if p.done >= p.total {
		eta = "0s"
	}
	line := fmt.Sprintf("%s [%s] %3.0f%% %d/%d %s  %.1f %s/s  elapsed %s  ETA %s",
		p.what, bar, 100*frac, p.done, p.total, p.unit, rate, p.unit, el.Round(time.Second), eta)
	if extra != "" {
		line += "  " + extra
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		return
	}
	fmt.Fprintln(p.w, line)
}
