package live

import (
	"bytes"
	"encoding/json"
	"image"
	"image/jpeg"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
	"github.com/didoedge/didoedge/runtime/stream"
)

// jpeg85 is the live frames' JPEG quality: the simulated camera's own, so
// that a second compression loses little.
var jpeg85 = jpeg.Options{Quality: 85}

// numSlots bounds the frames between the pipeline and the encoder: one
// being encoded, others waiting; more are dropped (counted).
const numSlots = 3

// slot is a frame copy, only of the parts some client subscribed to.
type slot struct {
	cc            *camChannels
	seq           uint64
	capture       time.Time
	want          [numStreams]bool
	width, height int
	rgb           []uint8
	mapW, mapH    int
	depth, scale  []float32
	epistemic     []float32
	confidence    []float32
	zones         []alerts.Zone // immutable (replaced by a reload)
	status        []alerts.ZoneStatus
	risks         []alerts.ZoneRisk
	dom           stream.DomainStatus
}

// fill copies what the subscribed streams need; with warm buffers it
// allocates nothing.
func (sl *slot) fill(cc *camChannels, f *stream.TapFrame) {
	sl.cc, sl.seq, sl.capture = cc, f.Seq, f.Capture
	for k := range numStreams {
		sl.want[k] = frameStream(k) && cc.subs[k].Load() > 0
	}
	sl.width, sl.height = f.Width, f.Height
	sl.rgb = sl.rgb[:0]
	if sl.want[sImage] {
		sl.rgb = append(sl.rgb, f.RGB...)
	}
	sl.mapW, sl.mapH = f.Maps.Width, f.Maps.Height
	cp := func(dst, src []float32, want bool) []float32 {
		if !want {
			return dst[:0]
		}
		return append(dst[:0], src...)
	}
	sl.depth = cp(sl.depth, f.Maps.Depth, sl.want[sDepth])
	sl.scale = cp(sl.scale, f.Maps.Scale, sl.want[sScale])
	sl.epistemic = cp(sl.epistemic, f.Maps.Epistemic, sl.want[sEpistemic])
	sl.confidence = cp(sl.confidence, f.Maps.Confidence, sl.want[sConfidence])
	sl.zones = f.Zones
	sl.status = append(sl.status[:0], f.Status...)
	sl.risks = append(sl.risks[:0], f.Risks...)
	sl.dom = f.Domain
}

// encoder is the encoder goroutine's state.
type encoder struct {
	s    *Server
	rgba *image.RGBA
	img  bytes.Buffer
	jpeg jpeg.Options
}

// run encodes frames until the work channel closes.
func (e *encoder) run() {
	defer close(e.s.encDone)
	for sl := range e.s.work {
		e.frame(sl)
		e.s.free <- sl
	}
}

// frame encodes each subscribed stream of one frame once and publishes it
// to every subscriber. The bytes are new per message: the clients' queues
// hold them until each writer sent them.
func (e *encoder) frame(sl *slot) {
	s, cc := e.s, sl.cc
	ts := uint64(sl.capture.UnixNano())
	t0 := time.Now()
	defer func() { s.encodeNS.Add(int64(time.Since(t0))) }()
	if sl.want[sImage] && len(sl.rgb) == 3*sl.width*sl.height && sl.width > 0 {
		if e.rgba == nil || e.rgba.Rect.Dx() != sl.width || e.rgba.Rect.Dy() != sl.height {
			e.rgba = image.NewRGBA(image.Rect(0, 0, sl.width, sl.height))
		}
		pix := e.rgba.Pix
		for i, j := 0, 0; i < len(sl.rgb); i, j = i+3, j+4 {
			pix[j], pix[j+1], pix[j+2], pix[j+3] = sl.rgb[i], sl.rgb[i+1], sl.rgb[i+2], 255
		}
		e.img.Reset()
		if err := jpeg.Encode(&e.img, e.rgba, &e.jpeg); err == nil {
			msg := mcaprec.AppendCompressedImage(make([]byte, 0, e.img.Len()+64), sl.capture, cc.name, "jpeg", e.img.Bytes())
			s.publish(cc.ch[sImage], ts, msg)
		}
	}
	n := sl.mapW * sl.mapH
	for _, m := range [...]struct {
		k  int
		px []float32
	}{{sDepth, sl.depth}, {sScale, sl.scale}, {sEpistemic, sl.epistemic}, {sConfidence, sl.confidence}} {
		if !sl.want[m.k] || len(m.px) != n || n == 0 {
			continue
		}
		msg := mcaprec.AppendRawImage32F(make([]byte, 0, 4*n+64), sl.capture, cc.name, sl.mapW, sl.mapH, m.px, 23)
		s.publish(cc.ch[m.k], ts, msg)
	}
	if sl.want[sCalibration] && cc.ch[sCalibration] != nil && sl.width > 0 {
		in := s.intrinsics(sl.width, sl.height)
		s.publish(cc.ch[sCalibration], ts, mcaprec.AppendCameraCalibration(nil, sl.capture, cc.name, in))
	}
	if sl.want[sAnnotations] {
		if b, err := json.Marshal(annotations(sl, sl.width, sl.height)); err == nil {
			s.publish(cc.ch[sAnnotations], ts, b)
		}
	}
	if sl.want[sAnnotationsMap] {
		if b, err := json.Marshal(annotations(sl, sl.mapW, sl.mapH)); err == nil {
			s.publish(cc.ch[sAnnotationsMap], ts, b)
		}
	}
	if sl.want[sRisk] {
		if b, err := json.Marshal(riskOf(sl)); err == nil {
			s.publish(cc.ch[sRisk], ts, b)
		}
	}
	if sl.want[sDomain] && cc.ch[sDomain] != nil && sl.dom.On {
		if b, err := json.Marshal(domainOf(sl)); err == nil {
			s.publish(cc.ch[sDomain], ts, b)
		}
	}
}

// domainReading is a didoedge.domain/1 message: the domain monitor after
// one frame (runtime/domain; docs/alerts.md#domain-monitor).
type domainReading struct {
	Camera string `json:"camera"`
	Seq    uint64 `json:"frame_seq"`
	TimeMS int64  `json:"time_ms"`
	// Distance is the frame's own, Smoothed the mean over the window that
	// is compared with Threshold.
	Distance   float64 `json:"distance"`
	Smoothed   float64 `json:"smoothed"`
	Threshold  float64 `json:"threshold"`
	WindowS    float64 `json:"window_s"`
	Shifted    bool    `json:"shifted"`
	Persistent bool    `json:"persistent"`
}

func domainOf(sl *slot) domainReading {
	d := sl.dom
	return domainReading{Camera: sl.cc.name, Seq: sl.seq, TimeMS: sl.capture.UnixMilli(), Distance: d.Distance, Smoothed: d.Smoothed,
		Threshold: d.Threshold, WindowS: d.WindowS, Shifted: d.Shifted, Persistent: d.Persistent}
}

// Foxglove message types in their JSON form (@foxglove/schemas).
type (
	fxTime struct {
		Sec  int64 `json:"sec"`
		Nsec int64 `json:"nsec"`
	}
	fxPoint struct {
		X float64 `json:"x"`
		Y float64 `json:"y"`
	}
	fxColor struct {
		R float64 `json:"r"`
		G float64 `json:"g"`
		B float64 `json:"b"`
		A float64 `json:"a"`
	}
	fxPoints struct {
		Timestamp     fxTime    `json:"timestamp"`
		Type          int       `json:"type"`
		Points        []fxPoint `json:"points"`
		OutlineColor  fxColor   `json:"outline_color"`
		OutlineColors []fxColor `json:"outline_colors"`
		FillColor     fxColor   `json:"fill_color"`
		Thickness     float64   `json:"thickness"`
	}
	fxText struct {
		Timestamp       fxTime  `json:"timestamp"`
		Position        fxPoint `json:"position"`
		Text            string  `json:"text"`
		FontSize        float64 `json:"font_size"`
		TextColor       fxColor `json:"text_color"`
		BackgroundColor fxColor `json:"background_color"`
	}
	fxAnnotations struct {
		Circles []struct{} `json:"circles"`
		Points  []fxPoints `json:"points"`
		Texts   []fxText   `json:"texts"`
	}
)

// pointsLineLoop is foxglove.PointsAnnotationType LINE_LOOP (a closed polygon).
const pointsLineLoop = 2

// levelColor is the zone colour of a level: green, amber, red (the debug
// page's).
func levelColor(l alerts.Level, alpha float64) fxColor {
	switch l {
	case alerts.LevelCritical:
		return fxColor{0.90, 0.10, 0.10, alpha}
	case alerts.LevelWarn:
		return fxColor{1.00, 0.70, 0.00, alpha}
	}
	return fxColor{0.15, 0.80, 0.25, alpha}
}

// annotations draws every zone's polygon (normalized coordinates scaled
// to a w x h image) coloured by its level, with its name and level.
func annotations(sl *slot, w, h int) fxAnnotations {
	t := fxTime{Sec: sl.capture.Unix(), Nsec: int64(sl.capture.Nanosecond())}
	out := fxAnnotations{Circles: []struct{}{}, Points: make([]fxPoints, 0, len(sl.zones)), Texts: make([]fxText, 0, len(sl.zones))}
	for i, z := range sl.zones {
		lv := alerts.LevelOK
		if i < len(sl.status) {
			lv = sl.status[i].Level
		}
		pts := make([]fxPoint, len(z.Polygon))
		minX, minY := float64(w), float64(h)
		for j, p := range z.Polygon {
			pts[j] = fxPoint{p[0] * float64(w), p[1] * float64(h)}
			minX, minY = min(minX, pts[j].X), min(minY, pts[j].Y)
		}
		out.Points = append(out.Points, fxPoints{Timestamp: t, Type: pointsLineLoop, Points: pts, OutlineColor: levelColor(lv, 1),
			OutlineColors: []fxColor{}, FillColor: levelColor(lv, 0.18), Thickness: 2})
		out.Texts = append(out.Texts, fxText{Timestamp: t, Position: fxPoint{minX + 3, minY + 12}, Text: z.Name + " " + lv.String(),
			FontSize: 11, TextColor: fxColor{1, 1, 1, 1}, BackgroundColor: levelColor(lv, 0.7)})
	}
	return out
}

// risk is a didoedge.zone_risk/1 message.
type risk struct {
	Camera string     `json:"camera"`
	Seq    uint64     `json:"frame_seq"`
	TimeMS int64      `json:"time_ms"`
	Zones  []zoneRisk `json:"zones"`
}

type zoneRisk struct {
	Name              string  `json:"name"`
	Level             string  `json:"level"`
	LevelIndex        int     `json:"level_index"`
	OODFraction       float32 `json:"ood_fraction"`
	AleatoricFraction float32 `json:"aleatoric_fraction"`
	EpistemicP95      float32 `json:"epistemic_p95"`
	PessimisticDepth  float32 `json:"pessimistic_depth_m,omitempty"`
	FusedOOD          float32 `json:"fused_ood_fraction"`
	FusedAleatoric    float32 `json:"fused_aleatoric_fraction"`
	// The native-confidence criterion, when the depth model has one.
	ConfidenceFraction      *float32 `json:"confidence_fraction,omitempty"`
	FusedConfidenceFraction *float32 `json:"fused_confidence_fraction,omitempty"`
	Episode                 string   `json:"episode_id,omitempty"`
}

func riskOf(sl *slot) risk {
	r := risk{Camera: sl.cc.name, Seq: sl.seq, TimeMS: sl.capture.UnixMilli(), Zones: make([]zoneRisk, 0, len(sl.status))}
	for i, st := range sl.status {
		z := zoneRisk{Name: st.Name, Level: st.Level.String(), LevelIndex: int(st.Level), FusedOOD: st.Fused.OODFraction,
			FusedAleatoric: st.Fused.AleatoricFraction, Episode: st.Episode}
		if st.Fused.HasConfidence {
			c := st.Fused.ConfidenceFraction
			z.FusedConfidenceFraction = &c
		}
		if i < len(sl.risks) && sl.risks[i].Zone == st.Name {
			rk := sl.risks[i]
			z.OODFraction, z.AleatoricFraction, z.EpistemicP95 = rk.OODFraction, rk.AleatoricFraction, rk.EpistemicP95
			if rk.ConfidenceValid > 0 {
				c := rk.ConfidenceFraction
				z.ConfidenceFraction = &c
			}
			if rk.HasDepth() {
				z.PessimisticDepth = rk.PessimisticDepth
			}
		}
		r.Zones = append(r.Zones, z)
	}
	return r
}
