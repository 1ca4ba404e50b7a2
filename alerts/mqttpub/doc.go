// Package mqttpub is the MQTT sink of the alert domain: it publishes alert
// events, zone states, statistics, event snapshots, availability and (opt-in)
// Home Assistant discovery with paho, on top of the durable outbox.
//
// Service implements alerts.Sink and its optional extensions; engines
// (one per camera) deliver to it. Events go through the outbox: each is
// fsynced on disk with a monotonic sequence number before Event returns,
// published QoS 1 in order, and removed only after the broker's PUBACK. A
// broker outage or a process crash therefore delays events but does not
// lose them; it may repeat some, which subscribers drop by sequence number
// (see docs/alerts.md). Zone states, snapshots and discovery configs are
// retained and republished on every connect, together with the
// availability "online"; the last will sets "offline".
package mqttpub
