package mcapsource

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/foxglove/mcap/go/mcap"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
)

// smallRecording writes a valid two-frame recording with the layout's
// channels (foxglove/mcap's writer, zstd chunks) and returns its bytes.
func smallRecording(t testing.TB, compression mcap.CompressionFormat) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.mcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := mcap.NewWriter(f, &mcap.WriterOptions{Chunked: true, ChunkSize: 512, Compression: compression, IncludeCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteHeader(&mcap.Header{Library: "test"}))
	imgSchema, err := mcaprec.SchemaData(mcaprec.CompressedImageSchema)
	must(err)
	rawSchema, err := mcaprec.SchemaData(mcaprec.RawImageSchema)
	must(err)
	must(w.WriteSchema(&mcap.Schema{ID: 1, Name: mcaprec.CompressedImageSchema, Encoding: "protobuf", Data: imgSchema}))
	must(w.WriteSchema(&mcap.Schema{ID: 2, Name: mcaprec.RawImageSchema, Encoding: "protobuf", Data: rawSchema}))
	must(w.WriteChannel(&mcap.Channel{ID: 0, SchemaID: 1, Topic: "/cam/image", MessageEncoding: "protobuf"}))
	must(w.WriteChannel(&mcap.Channel{ID: 1, SchemaID: 2, Topic: "/cam/depth", MessageEncoding: "protobuf"}))
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82")
	for k := 1; k <= 2; k++ {
		tm := time.Unix(1_800_000_000, int64(k)*1e6)
		must(w.WriteMessage(&mcap.Message{ChannelID: 0, Sequence: uint32(k), LogTime: uint64(tm.UnixNano()),
			Data: mcaprec.AppendCompressedImage(nil, tm, "cam", "png", png)}))
		must(w.WriteMessage(&mcap.Message{ChannelID: 1, Sequence: uint32(k), LogTime: uint64(tm.UnixNano()),
			Data: mcaprec.AppendRawImage32F(nil, tm, "cam", 1, 1, []float32{float32(k)}, 23)}))
	}
	must(w.Close())
	must(f.Close())
	b, err := os.ReadFile(path)
	must(err)
	return b
}

// drain reads a file as a replay source and as a Reader; it must end with
// io.EOF or an error, never a panic or a hang.
func drain(t *testing.T, path string) (frames int, err error) {
	src, err := Open(Config{Path: path})
	if err != nil {
		return 0, err
	}
	defer src.Close()
	var f camera.Frame
	for range 1000 {
		if err = src.Next(context.Background(), &f); err != nil {
			break
		}
		frames++
	}
	rd, rerr := OpenReader(path)
	if rerr != nil {
		return frames, err
	}
	defer rd.Close()
	var m Message
	for range 10000 {
		if rerr = rd.Next(&m); rerr != nil {
			break
		}
		if m.Stream == mcaprec.DepthStream {
			if ri, perr := mcaprec.ParseRawImage(m.Data); perr == nil {
				_, _ = ri.Float32s(nil)
			}
		}
	}
	return frames, err
}

func TestSmallRecordingReplays(t *testing.T) {
	for _, c := range []mcap.CompressionFormat{mcap.CompressionZSTD, mcap.CompressionLZ4, mcap.CompressionNone} {
		path := filepath.Join(t.TempDir(), "r.mcap")
		if err := os.WriteFile(path, smallRecording(t, c), 0o644); err != nil {
			t.Fatal(err)
		}
		n, err := drain(t, path)
		if n != 2 || !errors.Is(err, io.EOF) {
			t.Fatalf("%q: %d frames, %v", c, n, err)
		}
	}
}

// TestDamagedErrorsNameFile: a damaged file gives an error naming the file.
func TestDamagedErrorsNameFile(t *testing.T) {
	data := smallRecording(t, mcap.CompressionNone)
	// Corrupt a byte in the middle of the first chunk's records.
	bad := append([]byte(nil), data...)
	for i := 40; i < 60; i++ {
		bad[i] ^= 0xff
	}
	path := filepath.Join(t.TempDir(), "damaged.mcap")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := drain(t, path)
	if err == nil || errors.Is(err, io.EOF) || !containsPath(err.Error(), path) {
		t.Fatalf("damaged file: %v", err)
	}
	notMCAP := filepath.Join(t.TempDir(), "x.mcap")
	os.WriteFile(notMCAP, []byte("hello world, not an mcap file"), 0o644)
	if _, err := Open(Config{Path: notMCAP}); err == nil || !containsPath(err.Error(), notMCAP) {
		t.Fatalf("not an MCAP file: %v", err)
	}
}

func containsPath(s, p string) bool {
	for i := 0; i+len(p) <= len(s); i++ {
		if s[i:i+len(p)] == p {
			return true
		}
	}
	return false
}

// FuzzReplay feeds damaged recordings (cut, flipped, spliced) to the
// replay source and the reader: no panic, no hang.
func FuzzReplay(f *testing.F) {
	for _, c := range []mcap.CompressionFormat{mcap.CompressionZSTD, mcap.CompressionLZ4, mcap.CompressionNone} {
		data := smallRecording(f, c)
		f.Add(data)
		f.Add(data[:len(data)/2])
		f.Add(data[:len(data)-30])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.mcap")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _ = drain(t, path)
	})
}
