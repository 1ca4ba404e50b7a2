package outbox

import (
	"fmt"
	"testing"
)

// BenchmarkAppendAfterAck is one alert event's durable write as the
// pipeline sees it in `didoedge bench latency` (one event per frame): the
// broker's acknowledgement of the previous event has just been recorded
// (Ack, not timed), then the next event is appended with its fsync
// (timed). The fsync commits whatever the file system journals at that
// moment, so the way Ack stores its position shows in Append's time.
//
//	go test ./alerts/outbox -run '^$' -bench AppendAfterAck -benchmem
func BenchmarkAppendAfterAck(b *testing.B) {
	o, err := Open(testOptions(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	payload := []byte(fmt.Sprintf(`{"event":"update","zone":"frame","level":"critical","reasons":["ood_fraction"],"pad":%q}`, make([]byte, 200)))
	add := func() uint64 {
		seq, err := o.Append(func(uint64) (Record, error) {
			return Record{Topic: "didoedge/v/front/events", QoS: 1, Payload: payload}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return seq
	}
	seq := add()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := o.Ack(seq); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		seq = add()
	}
}

// BenchmarkAck is the acknowledgement itself (the publisher's goroutine,
// not the frame's path: Append does not wait for it): the ack file
// written to a temporary file, fsynced, renamed over the old one and the
// directory fsynced.
//
//	go test ./alerts/outbox -run '^$' -bench 'Ack$' -benchmem
func BenchmarkAck(b *testing.B) {
	o, err := Open(testOptions(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		seq, err := o.Append(func(uint64) (Record, error) {
			return Record{Topic: "didoedge/v/front/events", QoS: 1, Payload: []byte(`{"event":"update"}`)}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := o.Ack(seq); err != nil {
			b.Fatal(err)
		}
	}
}
