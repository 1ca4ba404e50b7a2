package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/mqttpub"
)

// MQTTControl is the MQTT side of the control (mqttpub.Service): the set
// topics' messages, already limited to clients allowed to publish them,
// and their results.
type MQTTControl interface {
	SubscribeControl(filter string, fn func(mqttpub.ControlMessage)) error
	PublishResult(topic string, payload []byte)
	Topics() alerts.Topics
}

// mqttQueue bounds the set messages waiting for the control: a client
// that floods the set topics loses its own messages, the broker never
// waits.
const mqttQueue = 16

// SetResult is the payload of a .../set/result message.
type SetResult struct {
	OK bool `json:"ok"`
	// Status is the HTTP status the same change gets from the API.
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
	// Topic is the set topic the result answers.
	Topic  string `json:"topic"`
	TimeMS int64  `json:"time_ms"`
	// Profile and Cameras are the configuration in force after the change.
	Profile string       `json:"profile"`
	Cameras []CameraInfo `json:"cameras,omitempty"`
}

type mqttKey struct{}

// viaMQTT reports whether ctx carries a change from an MQTT set topic:
// those are allowed by mqtt.set_topics (and the broker's ACL), not by
// live.control.
func viaMQTT(ctx context.Context) bool { return ctx.Value(mqttKey{}) != nil }

// ServeMQTT applies the changes published on the vehicle's set topics
// until ctx ends: <prefix>/<vehicle>/<camera>/zones/set (the body of PUT
// /api/cameras/{camera}/zones) and <prefix>/<vehicle>/profile/set (the
// body of PUT /api/profile), each validated and applied exactly as
// through the HTTP API (logged and counted; not written to the file),
// with its result on the set topic + "/result". Who may publish there is
// the broker's decision (mqttpub.Service.SubscribeControl).
func (c *Control) ServeMQTT(ctx context.Context, m MQTTControl) error {
	t := m.Topics()
	base := t.Prefix + "/" + t.Vehicle + "/"
	queue := make(chan mqttpub.ControlMessage, mqttQueue)
	take := func(msg mqttpub.ControlMessage) {
		select {
		case queue <- msg:
		default:
			c.refused.Add(1)
			c.log.Warn("live control: mqtt set message dropped: too many waiting", "topic", msg.Topic, "from", msg.From)
		}
	}
	for _, f := range []string{base + "+/zones/set", base + "profile/set"} {
		if err := m.SubscribeControl(f, take); err != nil {
			return fmt.Errorf("mqtt set topics %s: %w", f, err)
		}
	}
	c.log.Info("live control: mqtt set topics", "zones", base+"<camera>/zones/set", "profile", base+"profile/set")
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case msg := <-queue:
				res := c.applyMQTT(ctx, base, msg)
				payload, err := json.Marshal(res)
				if err != nil {
					c.log.Error("live control: mqtt result", "err", err)
					continue
				}
				m.PublishResult(msg.Topic+"/result", payload)
			}
		}
	}()
	return nil
}

// applyMQTT applies one set message and describes the outcome.
func (c *Control) applyMQTT(ctx context.Context, base string, msg mqttpub.ControlMessage) SetResult {
	ctx = context.WithValue(ctx, mqttKey{}, true)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res := SetResult{Topic: msg.Topic}
	who := msg.From
	rest := strings.TrimPrefix(msg.Topic, base)
	var err error
	switch {
	case rest == "profile/set":
		var body struct {
			Name string `json:"name"`
		}
		if err = decodeStrict(msg.Payload, &body); err == nil {
			err = c.SetProfile(ctx, body.Name, false, who)
		}
	case strings.HasSuffix(rest, "/zones/set") && strings.Count(rest, "/") == 2:
		var zs ZoneSetJSON
		if err = decodeStrict(msg.Payload, &zs); err == nil {
			err = c.SetZones(ctx, strings.TrimSuffix(rest, "/zones/set"), zs, false, who)
		}
	default:
		err = refuse(http.StatusNotFound, "no such set topic %q", msg.Topic)
	}
	res.TimeMS = time.Now().UnixMilli()
	if err != nil {
		var e *Error
		res.Status, res.Error = http.StatusInternalServerError, err.Error()
		if errors.As(err, &e) {
			res.Status = e.Status
		}
		return res
	}
	res.OK, res.Status = true, http.StatusOK
	res.Profile, _ = c.Profiles()
	res.Cameras, _ = c.Cameras()
	return res
}

// decodeStrict decodes a JSON payload, refusing unknown keys (named); a
// refusal is a 400 as in the HTTP API.
func decodeStrict(data []byte, v any) error {
	if err := decodeJSON(bytes.NewReader(data), v); err != nil {
		return &Error{Status: http.StatusBadRequest, Err: fmt.Errorf("payload: %w", err)}
	}
	return nil
}
