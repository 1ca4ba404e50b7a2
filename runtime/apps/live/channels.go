package live

import (
	"embed"
	"encoding/base64"
	"fmt"
	"sync/atomic"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/schema"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
)

//go:embed schemas/*.json
var schemaFiles embed.FS

// Streams of a camera beyond the recorder's (runtime/record/mcaprec).
const (
	AnnotationsStream    = "zone_annotations"
	AnnotationsMapStream = "zone_annotations_map"
	RiskStream           = "zone_risk"
	// DomainStream is the domain monitor's per-frame distance to the
	// AuxUE's training domain beside its threshold (a plot topic), on
	// cameras whose AuxUE has a training-domain record.
	DomainStream = "domain"
	// AnnotationsSchema is Foxglove's image annotation message; its JSON
	// Schema is @foxglove/schemas 2.1.0's (schemas/, checked by the Node
	// test against the package).
	AnnotationsSchema = "foxglove.ImageAnnotations"
	RiskSchema        = "didoedge.zone_risk/1"
	DomainSchema      = "didoedge.domain/1"
)

// stream indexes: the per-camera channels in advertise order.
const (
	sImage = iota
	sDepth
	sScale
	sEpistemic
	sConfidence
	sCalibration
	sAnnotations
	sAnnotationsMap
	sRisk
	sDomain
	sEvents
	sStates
	numStreams
)

// frameStreams are the streams encoded from frames (a subscription to one
// makes the pipeline hand the camera's frames over).
func frameStream(k int) bool { return k <= sDomain }

// channel is one advertised channel.
type channel struct {
	id             uint32
	camera         string
	stream         int
	topic          string
	encoding       string
	schemaName     string
	schema         string
	schemaEncoding string
}

// advert is a channel as the advertise message lists it.
type advert struct {
	ID             uint32 `json:"id"`
	Topic          string `json:"topic"`
	Encoding       string `json:"encoding"`
	SchemaName     string `json:"schemaName"`
	Schema         string `json:"schema"`
	SchemaEncoding string `json:"schemaEncoding,omitempty"`
}

func (c *channel) advert() advert {
	return advert{ID: c.id, Topic: c.topic, Encoding: c.encoding, SchemaName: c.schemaName, Schema: c.schema, SchemaEncoding: c.schemaEncoding}
}

// camChannels are a camera's channels and their subscriber counts.
type camChannels struct {
	name string
	ch   [numStreams]*channel // nil: not advertised (calibration without intrinsics)
	subs [numStreams]atomic.Int32
}

// wantsFrames reports whether any frame stream has a subscriber.
func (cc *camChannels) wantsFrames() bool {
	for k := range numStreams {
		if frameStream(k) && cc.subs[k].Load() > 0 {
			return true
		}
	}
	return false
}

// schemas are the schema texts of every channel kind, built once.
type schemas struct {
	image, raw, calib string // base64 FileDescriptorSets (protobuf channels)
	annotations, risk string
	domain            string
	event, state      string
}

func loadSchemas() (*schemas, error) {
	var s schemas
	for _, x := range []struct {
		name string
		dst  *string
	}{{mcaprec.CompressedImageSchema, &s.image}, {mcaprec.RawImageSchema, &s.raw}, {mcaprec.CameraCalibrationSchema, &s.calib}} {
		b, err := mcaprec.SchemaData(x.name)
		if err != nil {
			return nil, err
		}
		// Protobuf schemas travel base64-encoded in the advertise JSON.
		*x.dst = base64.StdEncoding.EncodeToString(b)
	}
	for _, x := range []struct {
		file string
		dst  *string
	}{{"schemas/foxglove.ImageAnnotations.json", &s.annotations}, {"schemas/zone_risk.v1.json", &s.risk}, {"schemas/domain.v1.json", &s.domain}} {
		b, err := schemaFiles.ReadFile(x.file)
		if err != nil {
			return nil, fmt.Errorf("live: schema %s: %w", x.file, err)
		}
		*x.dst = string(b)
	}
	for _, x := range []struct {
		name string
		dst  *string
	}{{schema.Event, &s.event}, {schema.State, &s.state}} {
		b, err := schema.Raw(x.name)
		if err != nil {
			return nil, fmt.Errorf("live: %w", err)
		}
		*x.dst = string(b)
	}
	return &s, nil
}

// newCamChannels declares a camera's channels with ids from next.
func (s *schemas) newCamChannels(camera string, withCalibration, withConfidence, withDomain bool, next func() uint32) *camChannels {
	cc := &camChannels{name: camera}
	add := func(k int, stream, enc, name, sch, schEnc string) {
		cc.ch[k] = &channel{id: next(), camera: camera, stream: k, topic: mcaprec.Topic(camera, stream), encoding: enc,
			schemaName: name, schema: sch, schemaEncoding: schEnc}
	}
	pb := mcaprec.ProtobufEncoding
	add(sImage, mcaprec.ImageStream, pb, mcaprec.CompressedImageSchema, s.image, pb)
	add(sDepth, mcaprec.DepthStream, pb, mcaprec.RawImageSchema, s.raw, pb)
	add(sScale, mcaprec.ScaleStream, pb, mcaprec.RawImageSchema, s.raw, pb)
	add(sEpistemic, mcaprec.EpistemicStream, pb, mcaprec.RawImageSchema, s.raw, pb)
	if withConfidence {
		add(sConfidence, mcaprec.ConfidenceStream, pb, mcaprec.RawImageSchema, s.raw, pb)
	}
	if withCalibration {
		add(sCalibration, mcaprec.CalibrationStream, pb, mcaprec.CameraCalibrationSchema, s.calib, pb)
	}
	js, jss := mcaprec.JSONEncoding, mcaprec.JSONSchemaEncoding
	add(sAnnotations, AnnotationsStream, js, AnnotationsSchema, s.annotations, jss)
	add(sAnnotationsMap, AnnotationsMapStream, js, AnnotationsSchema, s.annotations, jss)
	add(sRisk, RiskStream, js, RiskSchema, s.risk, jss)
	if withDomain {
		add(sDomain, DomainStream, js, DomainSchema, s.domain, jss)
	}
	add(sEvents, mcaprec.EventsStream, js, alerts.EventSchemaID, s.event, jss)
	add(sStates, mcaprec.ZoneStatesStream, js, alerts.StateSchemaID, s.state, jss)
	return cc
}
