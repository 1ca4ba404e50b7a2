package upload

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collectors are the queue's Prometheus metrics, read from stats at
// scrape time (the owner passes the queue's Stats method; now is
// time.Now, replaced by tests).
func Collectors(stats func() Stats, now func() time.Time) []prometheus.Collector {
	gauge := func(name, help string, fn func(Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return fn(stats()) })
	}
	counter := func(name, help string, fn func(Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(fn(stats())) })
	}
	return []prometheus.Collector{
		gauge("didoedge_upload_queued_files", "Recordings in the upload queue (on disk, not yet uploaded and verified).",
			func(s Stats) float64 { return float64(s.Queued) }),
		gauge("didoedge_upload_queued_bytes", "Bytes in the upload queue (counted against record.upload.max_bytes).",
			func(s Stats) float64 { return float64(s.QueuedBytes) }),
		gauge("didoedge_upload_oldest_queued_age_seconds", "Age of the oldest queued recording since it was queued; 0 when the queue is empty.",
			func(s Stats) float64 {
				if s.Oldest.IsZero() {
					return 0
				}
				return max(0, now().Sub(s.Oldest).Seconds())
			}),
		counter("didoedge_upload_uploaded_files_total", "Recordings uploaded, verified (size, SHA-256, ETag) and deleted locally.",
			func(s Stats) int64 { return s.Uploaded }),
		counter("didoedge_upload_uploaded_bytes_total", "Bytes of the recordings uploaded and verified.",
			func(s Stats) int64 { return s.UploadedBytes }),
		counter("didoedge_upload_failed_attempts_total", "Upload attempts that failed (storage unreachable, refused, or not verified) and were retried.",
			func(s Stats) int64 { return s.Failures }),
		counter("didoedge_upload_refused_total", "Recordings the queue refused because they would exceed record.upload.max_bytes (they wait in record.dir).",
			func(s Stats) int64 { return s.Refused }),
		counter("didoedge_upload_resumed_parts_total", "Multipart parts found on the server after a restart and not sent again.",
			func(s Stats) int64 { return s.ResumedParts }),
	}
}
