package mcaprec

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Foxglove schema names (the protobuf full names Foxglove looks for).
const (
	CompressedImageSchema   = "foxglove.CompressedImage"
	RawImageSchema          = "foxglove.RawImage"
	CameraCalibrationSchema = "foxglove.CameraCalibration"
)

// Encodings of schemas and messages (MCAP well-known values).
const (
	ProtobufEncoding   = "protobuf"
	JSONEncoding       = "json"
	JSONSchemaEncoding = "jsonschema"
)

// field describes one field of a Foxglove message. Numbers and types are
// those of the Foxglove schemas (foxglove-sdk, @foxglove/schemas 2.1.0:
// the test in internal/mcapcheck compares them with the .proto files that
// package generates).
type field struct {
	name     string
	number   int32
	typ      descriptorpb.FieldDescriptorProto_Type
	repeated bool
	message  string // for TYPE_MESSAGE
}

// fields returns the fields of one Foxglove message ("CompressedImage",
// "RawImage", "CameraCalibration"); nil for any other name.
func fields(message string) []field {
	const (
		str  = descriptorpb.FieldDescriptorProto_TYPE_STRING
		byt  = descriptorpb.FieldDescriptorProto_TYPE_BYTES
		fx32 = descriptorpb.FieldDescriptorProto_TYPE_FIXED32
		dbl  = descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
	)
	ts := func(n int32) field {
		return field{"timestamp", n, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, false, ".google.protobuf.Timestamp"}
	}
	switch message {
	case "CompressedImage":
		return []field{ts(1), {"frame_id", 4, str, false, ""}, {"data", 2, byt, false, ""}, {"format", 3, str, false, ""}}
	case "RawImage":
		return []field{ts(1), {"frame_id", 7, str, false, ""}, {"width", 2, fx32, false, ""}, {"height", 3, fx32, false, ""},
			{"encoding", 4, str, false, ""}, {"step", 5, fx32, false, ""}, {"data", 6, byt, false, ""}}
	case "CameraCalibration":
		return []field{ts(1), {"frame_id", 9, str, false, ""}, {"width", 2, fx32, false, ""}, {"height", 3, fx32, false, ""},
			{"distortion_model", 4, str, false, ""}, {"D", 5, dbl, true, ""}, {"K", 6, dbl, true, ""},
			{"R", 7, dbl, true, ""}, {"P", 8, dbl, true, ""}}
	}
	return nil
}

// fileDescriptor builds foxglove/<name>.proto.
func fileDescriptor(name string) *descriptorpb.FileDescriptorProto {
	msg := &descriptorpb.DescriptorProto{Name: proto.String(name)}
	for _, f := range fields(name) {
		label := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
		if f.repeated {
			label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
		}
		fd := &descriptorpb.FieldDescriptorProto{
			Name: proto.String(f.name), Number: proto.Int32(f.number), Label: label.Enum(), Type: f.typ.Enum(),
			JsonName: proto.String(f.name),
		}
		if f.message != "" {
			fd.TypeName = proto.String(f.message)
		}
		msg.Field = append(msg.Field, fd)
	}
	return &descriptorpb.FileDescriptorProto{
		Name:        proto.String("foxglove/" + name + ".proto"),
		Package:     proto.String("foxglove"),
		Dependency:  []string{"google/protobuf/timestamp.proto"},
		MessageType: []*descriptorpb.DescriptorProto{msg},
		Syntax:      proto.String("proto3"),
	}
}

// SchemaData returns the MCAP schema data of a Foxglove message
// (CompressedImageSchema, RawImageSchema, CameraCalibrationSchema): a
// binary google.protobuf.FileDescriptorSet holding the message's file and
// google/protobuf/timestamp.proto, checked by protodesc. Writers call it
// once per file.
func SchemaData(schemaName string) ([]byte, error) {
	name, ok := strings.CutPrefix(schemaName, "foxglove.")
	if !ok || fields(name) == nil {
		return nil, fmt.Errorf("no Foxglove schema %q", schemaName)
	}
	ts := protodesc.ToFileDescriptorProto(timestamppb.File_google_protobuf_timestamp_proto)
	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{ts, fileDescriptor(name)}}
	if _, err := protodesc.NewFiles(set); err != nil {
		return nil, fmt.Errorf("foxglove schema %s: %w", schemaName, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("foxglove schema %s: %w", schemaName, err)
	}
	return b, nil
}
