package mqttpub

import (
	"encoding/json"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/didoedge/didoedge/alerts"
)

// Home Assistant MQTT discovery (docs: home-assistant.io/integrations/mqtt,
// "MQTT Discovery"): a retained JSON config on
// <prefix>/<component>/<node_id>/<object_id>/config makes Home Assistant
// create the entity; an empty retained payload removes it. Home Assistant
// announces itself with "online" on <prefix>/status (its birth message),
// after which devices publish their configs again. Each zone of each
// camera becomes three entities of one device per camera:
//
//   - binary_sensor <camera> <zone> risk: ON while the zone's level is not ok;
//   - sensor <camera> <zone> level: ok, warn or critical (device class enum);
//   - sensor <camera> <zone> OOD fraction: the fused OOD fraction in percent.
//
// All read the zone's retained state topic; their availability is the
// vehicle's availability topic, which the broker sets to "offline" as the
// publisher's last will.

// DiscoveryConfig is one retained discovery message.
type DiscoveryConfig struct {
	Topic   string
	Payload []byte
}

// haDevice is the device block of a discovery payload.
type haDevice struct {
	Identifiers  []string `json:"identifiers"`
	Name         string   `json:"name"`
	Manufacturer string   `json:"manufacturer"`
	Model        string   `json:"model"`
	SWVersion    string   `json:"sw_version,omitempty"`
}

// haOrigin names the application that publishes the discovery message.
type haOrigin struct {
	Name      string `json:"name"`
	SWVersion string `json:"sw_version,omitempty"`
}

// haEntity holds the documented discovery keys this package uses, for
// binary_sensor and sensor (alerts/schema/ha-discovery.json lists them).
type haEntity struct {
	Name                string   `json:"name"`
	UniqueID            string   `json:"unique_id"`
	ObjectID            string   `json:"object_id"`
	StateTopic          string   `json:"state_topic"`
	ValueTemplate       string   `json:"value_template"`
	AvailabilityTopic   string   `json:"availability_topic"`
	PayloadAvailable    string   `json:"payload_available"`
	PayloadNotAvailable string   `json:"payload_not_available"`
	QoS                 int      `json:"qos"`
	DeviceClass         string   `json:"device_class,omitempty"`
	PayloadOn           string   `json:"payload_on,omitempty"`
	PayloadOff          string   `json:"payload_off,omitempty"`
	Options             []string `json:"options,omitempty"`
	UnitOfMeasurement   string   `json:"unit_of_measurement,omitempty"`
	StateClass          string   `json:"state_class,omitempty"`
	DisplayPrecision    *int     `json:"suggested_display_precision,omitempty"`
	Icon                string   `json:"icon,omitempty"`
	Device              haDevice `json:"device"`
	Origin              haOrigin `json:"origin"`
}

// haIDPattern is what Home Assistant accepts in node and object ids.
var haIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// discovery builds and remembers the discovery configs of every camera.
type discovery struct {
	cfg     HomeAssistantConfig
	topics  alerts.Topics
	version string

	mu        sync.Mutex
	published map[string][]string // camera -> config topics published
}

func newDiscovery(cfg HomeAssistantConfig, topics alerts.Topics) *discovery {
	v := ""
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return &discovery{cfg: cfg, topics: topics, version: v, published: map[string][]string{}}
}

// announce returns the configs of a camera's zones and the config topics
// of zones the camera no longer has.
func (d *discovery) announce(vehicle, camera string, zones []string) (set []DiscoveryConfig, clear []string, err error) {
	set, err = DiscoveryConfigs(d.cfg, d.topics, vehicle, camera, zones, d.version)
	if err != nil {
		return nil, nil, err
	}
	now := make([]string, len(set))
	for i, c := range set {
		now[i] = c.Topic
	}
	d.mu.Lock()
	for _, old := range d.published[camera] {
		if !slices.Contains(now, old) {
			clear = append(clear, old)
		}
	}
	d.published[camera] = now
	d.mu.Unlock()
	return set, clear, nil
}

// forget returns the config topics published for camera and forgets
// them (the camera was removed).
func (d *discovery) forget(camera string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	topics := d.published[camera]
	delete(d.published, camera)
	return topics
}

// DiscoveryConfigs returns the three discovery configs of every zone of a
// camera (binary_sensor risk, sensor level, sensor OOD fraction), in zone
// order. version fills sw_version when not empty.
func DiscoveryConfigs(cfg HomeAssistantConfig, topics alerts.Topics, vehicle, camera string, zones []string, version string) ([]DiscoveryConfig, error) {
	node := "didoedge_" + vehicle
	if !haIDPattern.MatchString(node) || !haIDPattern.MatchString(camera) {
		return nil, fmt.Errorf("home assistant discovery: vehicle %q or camera %q is not a valid id", vehicle, camera)
	}
	dev := haDevice{Identifiers: []string{node + "_" + camera}, Name: "didoedge " + vehicle + " " + camera,
		Manufacturer: "didoedge", Model: "uncertainty-aware depth camera", SWVersion: version}
	origin := haOrigin{Name: "didoedge", SWVersion: version}
	two := 2
	var out []DiscoveryConfig
	for _, z := range zones {
		base := haEntity{StateTopic: topics.ZoneState(camera, z), AvailabilityTopic: topics.Availability(),
			PayloadAvailable: Online, PayloadNotAvailable: Offline, QoS: 1, Device: dev, Origin: origin}
		id := node + "_" + camera + "_" + z
		risk := base
		risk.Name, risk.UniqueID, risk.ObjectID = camera+" "+z+" risk", id+"_risk", id+"_risk"
		risk.DeviceClass, risk.PayloadOn, risk.PayloadOff = "safety", "ON", "OFF"
		risk.ValueTemplate = "{{ 'OFF' if value_json.level == 'ok' else 'ON' }}"
		level := base
		level.Name, level.UniqueID, level.ObjectID = camera+" "+z+" level", id+"_level", id+"_level"
		level.DeviceClass, level.Options = "enum", []string{"ok", "warn", "critical"}
		level.ValueTemplate = "{{ value_json.level }}"
		level.Icon = "mdi:alert-circle-outline"
		ood := base
		ood.Name, ood.UniqueID, ood.ObjectID = camera+" "+z+" OOD fraction", id+"_ood_fraction", id+"_ood_fraction"
		ood.UnitOfMeasurement, ood.StateClass, ood.DisplayPrecision = "%", "measurement", &two
		// "None" sets the sensor to unknown while the state has no metrics yet.
		ood.ValueTemplate = "{{ (value_json.metrics.fused.ood_fraction * 100) | round(2) if value_json.metrics is defined and value_json.metrics.fused is defined else 'None' }}"
		ood.Icon = "mdi:eye-off-outline"
		for _, e := range []struct {
			component string
			entity    haEntity
		}{{"binary_sensor", risk}, {"sensor", level}, {"sensor", ood}} {
			payload, err := json.Marshal(e.entity)
			if err != nil {
				return nil, fmt.Errorf("home assistant discovery: %w", err)
			}
			out = append(out, DiscoveryConfig{
				Topic:   cfg.Prefix + "/" + e.component + "/" + node + "/" + e.entity.ObjectID + "/config",
				Payload: payload})
		}
	}
	return out, nil
}
