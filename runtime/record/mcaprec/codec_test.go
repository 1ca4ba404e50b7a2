package mcaprec

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/didoedge/didoedge/pkg/mapgrid"
)

// decodeWithProtobuf decodes data with the protobuf library from the
// schema data the recorder stores: an independent check of the codec.
func decodeWithProtobuf(t *testing.T, schemaName string, data []byte) protoreflect.Message {
	t.Helper()
	sd, err := SchemaData(schemaName)
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(sd, &set); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		t.Fatal(err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(schemaName))
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(d.(protoreflect.MessageDescriptor))
	if err := proto.Unmarshal(data, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCodecAgainstProtobuf(t *testing.T) {
	tm := time.Unix(1_800_000_000, 987_654_321)
	img := AppendCompressedImage(nil, tm, "front", "jpeg", []byte{1, 2, 3})
	m := decodeWithProtobuf(t, CompressedImageSchema, img)
	get := func(m protoreflect.Message, name string) protoreflect.Value {
		return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
	}
	ts := get(m, "timestamp").Message()
	if get(ts, "seconds").Int() != 1_800_000_000 || get(ts, "nanos").Int() != 987_654_321 ||
		get(m, "frame_id").String() != "front" || get(m, "format").String() != "jpeg" || string(get(m, "data").Bytes()) != "\x01\x02\x03" {
		t.Fatalf("CompressedImage decoded as %v", m)
	}
	back, err := ParseCompressedImage(img)
	if err != nil || !back.Time.Equal(tm) || back.FrameID != "front" || back.Format != "jpeg" || len(back.Data) != 3 {
		t.Fatalf("ParseCompressedImage: %+v %v", back, err)
	}

	px := []float32{1, -2.5, 3.25e-3, float32(math.Inf(1)), 1.0001, 65504.7}
	raw := AppendRawImage32F(nil, tm, "front", 3, 2, px, 23)
	rm := decodeWithProtobuf(t, RawImageSchema, raw)
	if get(rm, "width").Uint() != 3 || get(rm, "height").Uint() != 2 || get(rm, "step").Uint() != 12 || get(rm, "encoding").String() != "32FC1" {
		t.Fatalf("RawImage decoded as %v", rm)
	}
	ri, err := ParseRawImage(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ri.Float32s(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range px {
		if got[i] != px[i] {
			t.Fatalf("exact map: pixel %d = %v, want %v", i, got[i], px[i])
		}
	}
	// Rounded to 10 mantissa bits: relative error <= 2^-11, Inf kept.
	ri, _ = ParseRawImage(AppendRawImage32F(nil, tm, "front", 3, 2, px, 10))
	got, _ = ri.Float32s(nil)
	for i, v := range px {
		if math.IsInf(float64(v), 0) {
			if got[i] != v {
				t.Fatalf("Inf became %v", got[i])
			}
			continue
		}
		if rel := math.Abs(float64(got[i]-v)) / math.Abs(float64(v)); rel > math.Pow(2, -11) {
			t.Fatalf("pixel %d: %v -> %v, relative error %g > 2^-11", i, v, got[i], rel)
		}
		if math.Float32bits(got[i])&(1<<13-1) != 0 {
			t.Fatalf("pixel %d: low bits not cleared: %x", i, math.Float32bits(got[i]))
		}
	}

	cal := AppendCameraCalibration(nil, tm, "front", Intrinsics{Width: 640, Height: 192, Fx: 500, Fy: 501, Cx: 319.5, Cy: 95.5})
	cm := decodeWithProtobuf(t, CameraCalibrationSchema, cal)
	if k := get(cm, "K").List(); k.Len() != 9 || k.Get(0).Float() != 500 || k.Get(5).Float() != 95.5 || get(cm, "P").List().Len() != 12 {
		t.Fatalf("CameraCalibration decoded as %v", cm)
	}
	pc, err := ParseCameraCalibration(cal)
	if err != nil {
		t.Fatal(err)
	}
	if in, err := pc.Intrinsics(); err != nil || in.Fx != 500 || in.Fy != 501 || in.Cx != 319.5 || in.Cy != 95.5 || in.Width != 640 {
		t.Fatalf("intrinsics %+v %v", in, err)
	}
}

func TestAppendRawImageAllocatesNothing(t *testing.T) {
	px := make([]float32, 640*192)
	buf := make([]byte, 0, 4*len(px)+256)
	tm := time.Unix(1, 0)
	if a := testing.AllocsPerRun(10, func() { buf = AppendRawImage32F(buf[:0], tm, "front", 640, 192, px, 10) }); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

func TestTopics(t *testing.T) {
	for _, c := range []struct {
		topic, cam, stream string
		ok                 bool
	}{{"/front/image", "front", "image", true}, {"/a/zone_states", "a", "zone_states", true},
		{"front/image", "", "", false}, {"/front/", "", "", false}, {"//image", "", "", false}} {
		cam, stream, ok := SplitTopic(c.topic)
		if ok != c.ok || (ok && (cam != c.cam || stream != c.stream)) {
			t.Errorf("SplitTopic(%q) = %q %q %v", c.topic, cam, stream, ok)
		}
	}
	for _, bad := range []string{"", "a b", "front/x", string(make([]byte, 65))} {
		if CheckCamera(bad) == nil {
			t.Errorf("CheckCamera(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", "Events", "image", "1x", "a-b"} {
		if CheckStream(bad) == nil {
			t.Errorf("CheckStream(%q) accepted", bad)
		}
	}
}

// FuzzParse feeds arbitrary bytes to the three decoders: no panic, and a
// 32FC1 or float16 image that parses decodes within its data (and a
// computed map rebuilds at its frame's size).
func FuzzParse(f *testing.F) {
	tm := time.Unix(1_800_000_000, 5)
	f.Add(AppendCompressedImage(nil, tm, "front", "jpeg", []byte{1, 2}))
	f.Add(AppendRawImage32F(nil, tm, "front", 2, 1, []float32{1, 2}, 23))
	f.Add(AppendCameraCalibration(nil, tm, "front", Intrinsics{Width: 2, Height: 2, Fx: 1, Fy: 1}))
	half, _ := AppendRawImage16F(nil, tm, "front", 2, 2, []float32{1, 2, 3, 4})
	f.Add(half)
	computed := MapChannel{Resolution: ResolutionComputed, Grid: mapgrid.Fit(5, 3, 2, 2, mapgrid.Letterbox), Value: ValueFloat16}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseCompressedImage(b)
		if ri, err := ParseRawImage(b); err == nil {
			if px, err := ri.Float32s(nil); err == nil && len(px) != int(ri.Width)*int(ri.Height) {
				t.Fatalf("%d pixels for %dx%d", len(px), ri.Width, ri.Height)
			}
			if px, err := computed.Decode(ri, nil); err == nil {
				if len(px) != int(ri.Width)*int(ri.Height) {
					t.Fatalf("%d pixels for %dx%d", len(px), ri.Width, ri.Height)
				}
				if fr, w, h, err := computed.FrameMap(px, int(ri.Width), int(ri.Height), nil); err == nil && (w != 5 || h != 3 || len(fr) != 15) {
					t.Fatalf("rebuilt %dx%d (%d values)", w, h, len(fr))
				}
			}
		}
		if c, err := ParseCameraCalibration(b); err == nil {
			_, _ = c.Intrinsics()
		}
	})
}
