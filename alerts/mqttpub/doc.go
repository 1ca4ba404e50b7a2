// Package mqttpub publishes alert events, zone states, statistics and
// availability over MQTT with paho, on top of the durable outbox.
//
// Events go through the outbox: each is fsynced on disk with a monotonic
// sequence number before Emit returns, published QoS 1 in order, and
// removed only after the broker's PUBACK. A broker outage or a process
// crash therefore delays events but does not lose them; it may repeat
// some, which subscribers drop by sequence number (see docs/alerts.md).
// Zone states are retained and republished on every connect, together
// with the availability "online"; the last will sets "offline".
package mqttpub
