// Package upload moves finished recordings (event clips, rotated files)
// from the vehicle to object storage through a durable on-disk queue.
//
// Enqueue moves a finished file into the queue directory beside a small
// JSON sidecar (object key, size, SHA-256, the vehicle, camera, model and
// calibration identities as object metadata, and, once started, the
// multipart upload's id); the queue is bounded by a byte budget. Run
// uploads the oldest item first and deletes its local file only after the
// object is verified: its size, its SHA-256 metadata and its ETag, which
// the uploader computes itself (the MD5 of a single PUT, or the MD5 of the
// parts' MD5s for a multipart upload). The requests carry the sums Enqueue
// computed, so that the server checks the bytes on receipt without the
// vehicle hashing them again: Content-MD5 on a single PUT and on each
// part, and the file's SHA-256 as a single PUT's signed payload hash.
// Collectors exports the counters to Prometheus.
//
// Crash safety: every step is written to disk before the next request, so
// a process killed at any point resumes where it was. A multipart upload
// is resumed from the parts the server already holds (ListParts); an item
// whose object already exists and verifies is not sent again; object keys
// are deterministic, so a retry overwrites rather than duplicates. An
// unreachable server is retried with a capped backoff, for as long as it
// takes; the queue stays on disk meanwhile.
package upload
