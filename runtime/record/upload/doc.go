// Package upload moves finished recordings (event clips, rotated files)
// from the vehicle to object storage through a durable on-disk queue.
//
// Enqueue moves a finished file into the queue directory beside a small
// JSON sidecar (object key, size, the file's CRC-64/NVME and each part's,
// the vehicle, camera, model and calibration identities as object
// metadata, and, once started, the multipart upload's id); the queue is
// bounded by a byte budget. Run uploads the oldest item first with S3's
// additional checksums: a single PUT carries the file's
// x-amz-checksum-crc64nvme, a multipart upload is a full-object
// CRC64NVME one whose parts carry theirs and whose completion carries the
// file's, so the server checks the bytes on receipt and refuses a
// mismatch, while the vehicle hashes each byte once (at Enqueue, with a
// CRC the CPU computes in hardware) and signs no payload
// (UNSIGNED-PAYLOAD). The local file is deleted only after the object is
// verified: a HEAD with checksum mode must report its size and, as its
// stored full-object CRC64NVME, the one Enqueue computed. Sidecars of the
// older format (SHA-256 and part MD5s) are upgraded before their upload:
// the file is checked against the old sums once and given CRCs. Collectors
// exports the counters to Prometheus.
//
// Crash safety: every step is written to disk before the next request, so
// a process killed at any point resumes where it was. A multipart upload
// is resumed from the parts the server already holds with the queued
// CRCs (ListParts); an item whose object already exists and verifies is
// not sent again; object keys are deterministic, so a retry overwrites
// rather than duplicates. An unreachable server is retried with a capped
// backoff, for as long as it takes; the queue stays on disk meanwhile.
package upload
