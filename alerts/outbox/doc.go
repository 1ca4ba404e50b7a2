// Package outbox is a durable, bounded, ordered queue of MQTT messages on
// disk. Records are appended to segment files with a CRC-32C each and
// fsynced before Append returns; the highest acknowledged sequence number
// lives in a separate file, replaced atomically (temporary file, fsync,
// rename, directory fsync). After a crash the log is replayed: records
// after the acknowledged one are pending again, a torn last record is
// dropped with a log line, and sequence numbers keep increasing.
//
// When full, the outbox drops the oldest droppable records (alert updates)
// and, if that is not enough, refuses the new record with ErrFull.
package outbox
