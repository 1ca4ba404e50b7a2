package upload

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/didoedge/didoedge/internal/promfunc"
)

// Collectors are the queue's Prometheus metrics, read from stats at
// scrape time (the owner passes the queue's Stats method; now is
// time.Now, replaced by tests).
func Collectors(stats func() Stats, now func() time.Time) []prometheus.Collector {
	return []prometheus.Collector{
		promfunc.Gauge("didoedge_upload_queued_files", "Recordings in the upload queue (on disk, not yet uploaded and verified).",
			func() int64 { return stats().Queued }),
		promfunc.Gauge("didoedge_upload_queued_bytes", "Bytes in the upload queue (counted against record.upload.max_bytes).",
			func() int64 { return stats().QueuedBytes }),
		promfunc.Gauge("didoedge_upload_oldest_queued_age_seconds", "Age of the oldest queued recording since it was queued; 0 when the queue is empty.",
			func() float64 {
				s := stats()
				if s.Oldest.IsZero() {
					return 0
				}
				return max(0, now().Sub(s.Oldest).Seconds())
			}),
		promfunc.Counter("didoedge_upload_uploaded_files_total", "Recordings uploaded, verified (size, SHA-256, ETag) and deleted locally.",
			func() int64 { return stats().Uploaded }),
		promfunc.Counter("didoedge_upload_uploaded_bytes_total", "Bytes of the recordings uploaded and verified.",
			func() int64 { return stats().UploadedBytes }),
		promfunc.Counter("didoedge_upload_failed_attempts_total", "Upload attempts that failed (storage unreachable, refused, or not verified) and were retried.",
			func() int64 { return stats().Failures }),
		promfunc.Counter("didoedge_upload_refused_total", "Recordings the queue refused because they would exceed record.upload.max_bytes (they wait in record.dir).",
			func() int64 { return stats().Refused }),
		promfunc.Counter("didoedge_upload_resumed_parts_total", "Multipart parts found on the server after a restart and not sent again.",
			func() int64 { return stats().ResumedParts }),
	}
}
