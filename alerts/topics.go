package alerts

// Topics builds the MQTT topic names of one vehicle.
type Topics struct {
	Prefix, Vehicle string
}

// Events is the topic of a camera's alert events (QoS 1, not retained).
func (t Topics) Events(camera string) string {
	return t.Prefix + "/" + t.Vehicle + "/" + camera + "/events"
}

// ZoneState is the retained topic of one zone's current state.
func (t Topics) ZoneState(camera, zone string) string {
	return t.Prefix + "/" + t.Vehicle + "/" + camera + "/zones/" + zone + "/state"
}

// Stats is the topic of a camera's periodic statistics.
func (t Topics) Stats(camera string) string {
	return t.Prefix + "/" + t.Vehicle + "/" + camera + "/stats"
}

// Availability is the retained topic carrying "online" or "offline"; the
// broker publishes "offline" as the last will when the publisher dies.
func (t Topics) Availability() string {
	return t.Prefix + "/" + t.Vehicle + "/availability"
}

// Snapshot is the retained topic of a zone's latest event snapshot (a
// binary JPEG).
func (t Topics) Snapshot(camera, zone string) string {
	return t.Prefix + "/" + t.Vehicle + "/" + camera + "/" + zone + "/snapshot"
}
