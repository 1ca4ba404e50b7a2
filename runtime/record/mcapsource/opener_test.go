package mcapsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foxglove/mcap/go/mcap"

	"github.com/didoedge/didoedge/camera"
	"github.com/didoedge/didoedge/runtime/record/mcaprec"
)

// longRecording writes n frames of 1 KiB in 512-byte chunks.
func longRecording(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := mcap.NewWriter(&b, &mcap.WriterOptions{Chunked: true, ChunkSize: 512, Compression: mcap.CompressionZSTD, IncludeCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := mcaprec.SchemaData(mcaprec.CompressedImageSchema)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteHeader(&mcap.Header{Library: "test"}))
	must(w.WriteSchema(&mcap.Schema{ID: 1, Name: mcaprec.CompressedImageSchema, Encoding: "protobuf", Data: schema}))
	must(w.WriteChannel(&mcap.Channel{ID: 0, SchemaID: 1, Topic: "/cam/image", MessageEncoding: "protobuf"}))
	pix := make([]byte, 1024)
	for k := 1; k <= n; k++ {
		for i := range pix {
			pix[i] = byte(i*k + i/7) // compresses, but not to nothing
		}
		tm := time.Unix(1_800_000_000, int64(k)*1e6)
		must(w.WriteMessage(&mcap.Message{ChannelID: 0, Sequence: uint32(k), LogTime: uint64(tm.UnixNano()),
			Data: mcaprec.AppendCompressedImage(nil, tm, "cam", "png", pix)}))
	}
	must(w.Close())
	return b.Bytes()
}

// countingOpener serves data as a stream whose length it declares as size
// and counts the bytes read; cut > 0 ends the stream there with io.EOF
// (a connection that closed early without saying so).
type countingOpener struct {
	data  []byte
	cut   int
	read  int
	opens int
}

func (c *countingOpener) open() (io.ReadCloser, int64, error) {
	c.opens++
	d := c.data
	if c.cut > 0 {
		d = d[:c.cut]
	}
	return io.NopCloser(&countReader{r: bytes.NewReader(d), n: &c.read}), int64(len(c.data)), nil
}

type countReader struct {
	r io.Reader
	n *int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += n
	return n, err
}

// sequences reads every message's sequence number.
func sequences(t *testing.T, r *Reader) []uint32 {
	t.Helper()
	defer r.Close()
	var out []uint32
	var m Message
	for {
		err := r.Next(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Sequence)
	}
}

// TestOpenReaderFromStreams: a recording read through an Opener gives
// the messages OpenReader gives from the file, having read only the
// first chunks when the first message comes (a stream, not a copy); a
// stream that ends before its declared size is an error naming the
// recording and the byte, where a file of that length is a killed
// writer's cut (Truncated).
func TestOpenReaderFromStreams(t *testing.T) {
	const n = 200
	data := longRecording(t, n)
	path := filepath.Join(t.TempDir(), "r.mcap")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fr, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	want := sequences(t, fr)
	if len(want) != n {
		t.Fatalf("%d messages from the file", len(want))
	}

	op := &countingOpener{data: data}
	const name = "s3://fleet/recordings/r.mcap"
	r, err := OpenReaderFrom(name, op.open)
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := r.Next(&m); err != nil || m.Sequence != 1 {
		t.Fatalf("first message: seq %d, %v", m.Sequence, err)
	}
	// 200 frames in 512-byte chunks: the first message needs the header,
	// the schema, the channel and one chunk, plus what the lexer buffers.
	if op.read > len(data)/4 {
		t.Fatalf("read %d of %d bytes before the first message: not streamed", op.read, len(data))
	}
	r.Close()
	r, err = OpenReaderFrom(name, op.open)
	if err != nil {
		t.Fatal(err)
	}
	if got := sequences(t, r); fmt.Sprint(got) != fmt.Sprint(want) || op.opens != 2 {
		t.Fatalf("through the opener (%d opens): %d messages, want %d", op.opens, len(got), len(want))
	}

	// Cut anywhere in 1500 bytes from a third (chunks of 512 bytes before
	// compression: some cuts fall between records, where the lexer sees a
	// clean io.EOF): as a stream of the full size, always an error; as a
	// file of that length, the messages before the cut and Truncated.
	for cut := len(data) / 3; cut < len(data)/3+1500; cut++ {
		short := &countingOpener{data: data, cut: cut}
		r, err = OpenReaderFrom(name, short.open)
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			err = r.Next(&m)
		}
		r.Close()
		if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), fmt.Sprintf(" of %d: ", len(data))) {
			t.Fatalf("a stream ended at byte %d of %d: %v", cut, len(data), err)
		}
	}
	cut := len(data) / 3
	if err := os.WriteFile(path, data[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	fr, err = OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	got := sequences(t, fr)
	if !fr.Truncated() || len(got) == 0 || len(got) >= n {
		t.Fatalf("file cut at byte %d: %d messages, truncated %v", cut, len(got), fr.Truncated())
	}

	// An opener's error, and a stream of unknown size.
	if _, err := OpenReaderFrom(name, func() (io.ReadCloser, int64, error) {
		return nil, 0, errors.New("get " + name + ": The specified key does not exist.")
	}); err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("opener error: %v", err)
	}
	if _, err := OpenReaderFrom(name, func() (io.ReadCloser, int64, error) {
		return io.NopCloser(bytes.NewReader(data)), -1, nil
	}); err == nil || !strings.Contains(err.Error(), name+": unknown size") {
		t.Fatalf("unknown size: %v", err)
	}

	// A source through Config.Open replays the frames, and names the
	// recording as Config.Path.
	small := smallRecording(t, mcap.CompressionZSTD)
	src, err := Open(Config{Path: name, Open: (&countingOpener{data: small}).open})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var f camera.Frame
	for err == nil {
		err = src.Next(context.Background(), &f)
	}
	if !errors.Is(err, io.EOF) || src.Frames() != 2 || f.Seq != 2 || f.Width != 1 {
		t.Fatalf("source through an opener: %d frames, last seq %d, %v", src.Frames(), f.Seq, err)
	}
	src, err = Open(Config{Path: name, Open: (&countingOpener{data: small}).open, Camera: "rear"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Next(context.Background(), &f); err == nil || !strings.Contains(err.Error(), "replay "+name+": no frames of camera rear") {
		t.Fatalf("camera rear: %v", err)
	}
}
