package replay_test

import (
	"os"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/apps/replay"
	"github.com/didoedge/didoedge/runtime/record"
)

// A replay with new thresholds raised the same episode one level higher.
func ExampleCompare() {
	recorded := alerts.Event{ID: "front-ego-1000-1", Type: alerts.EventNew, Kind: alerts.KindZone, Camera: "front", Zone: "ego",
		Level: alerts.LevelWarn, Previous: alerts.LevelOK, FrameSeq: 3, StartMS: 1000, TimeMS: 1000}
	replayed := recorded
	replayed.Level = alerts.LevelCritical
	rec := &record.Recording{Camera: "front"}
	res := replay.Compare(rec, []alerts.Event{recorded}, []alerts.Event{replayed})
	res.Write(os.Stdout)
	// Output:
	// zone ego: episodes recorded 1, replayed 1; events 1, mismatches 1
	//   MISMATCH frame 3       new    warn     (was ok      ) episode start 00:00:01.000 UTC  front-ego-1000-1: level warn, replayed critical
	// replay differs from the recording: 1 mismatches among 1 events
}
