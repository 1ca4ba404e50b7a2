package camera

import (
	"fmt"
	"time"
)

// EventKind classifies supervisor events.
type EventKind int

// Event kinds, in the order a healthy start produces them.
const (
	// EventConnected: an RTSP session reached PLAY.
	EventConnected EventKind = iota + 1
	// EventFault: the source stopped delivering frames (connect failure,
	// session error, or the stall watchdog). Emitted once per outage.
	EventFault
	// EventRecovered: the first frame after a fault.
	EventRecovered
)

func (k EventKind) String() string {
	switch k {
	case EventConnected:
		return "connected"
	case EventFault:
		return "fault"
	case EventRecovered:
		return "recovered"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event reports a change in a source's health. Reason is set on faults and
// never contains credentials.
type Event struct {
	Kind     EventKind
	SourceID string
	Time     time.Time
	Reason   string
	// Attempt counts consecutive failed sessions (0 on connected/recovered).
	Attempt int
}
