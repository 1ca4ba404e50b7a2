package mcapsource

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/foxglove/mcap/go/mcap"
	"github.com/klauspost/compress/zstd"

	"github.com/didoedge/didoedge/runtime/record/mcaprec"
)

// Message is one message of a recording. Data is valid until the next
// call of Reader.Next.
type Message struct {
	Topic, Camera, Stream string
	SchemaName            string
	Encoding              string // message encoding: protobuf or json
	Sequence              uint32
	LogTime               uint64 // nanoseconds since the Unix epoch
	Data                  []byte
	// ChannelID and ChannelMetadata are the message's channel's (a map
	// channel's metadata says its grid and precision: mcaprec.ParseMapChannel);
	// the map is the reader's, not to be modified.
	ChannelID       uint16
	ChannelMetadata map[string]string
}

// Reader walks the messages of a recording in file order, without the
// summary section.
type Reader struct {
	path     string
	f        io.ReadCloser
	cr       *countingReader
	size     int64
	lex      *mcap.Lexer
	zstd     *zstd.Decoder
	schemas  map[uint16]*mcap.Schema
	channels map[uint16]*mcap.Channel
	buf      []byte
	metadata []mcap.Metadata
	header   *mcap.Header

	truncated bool
	complete  bool // the footer was read
	done      bool
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// maxRecord bounds what a damaged length field can make the reader
// allocate: 32 MiB (twice the largest chunk the recorder writes,
// record.chunk_bytes <= 16 MiB), or four times the file for larger files
// (a record can exceed the file only inside a compressed chunk), at most
// 2 GiB.
func maxRecord(size int64) int {
	return int(min(max(32<<20, 4*size), 2<<30-1))
}

// Opener opens a recording for one pass from its first byte: r streams
// its content, size is its length in bytes (which bounds what a damaged
// length field may allocate, and tells a tail cut by a killed writer from
// damage). Each call is a new pass: a local file opened again, or a new
// GET of an object, so a recording in object storage is read as a stream,
// never copied whole.
type Opener func() (r io.ReadCloser, size int64, err error)

// FileOpener opens the local file path.
func FileOpener(path string) Opener {
	return func() (io.ReadCloser, int64, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, st.Size(), nil
	}
}

// OpenReader opens a local recording and reads its header.
func OpenReader(path string) (*Reader, error) { return OpenReaderFrom(path, FileOpener(path)) }

// OpenReaderFrom opens the recording open opens and reads its header; name
// (a path or an s3:// URL) names it in errors.
func OpenReaderFrom(name string, open Opener) (*Reader, error) {
	f, size, err := open()
	if err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	if size < 0 {
		f.Close()
		return nil, fmt.Errorf("recording %s: unknown size", name)
	}
	r := &Reader{path: name, f: f, size: size, cr: &countingReader{r: f},
		schemas: map[uint16]*mcap.Schema{}, channels: map[uint16]*mcap.Channel{}}
	lim := maxRecord(r.size)
	// A zstd decoder of our own: one goroutine, and memory bounded like
	// the records (the library's default decoder trusts the window size a
	// damaged frame header claims).
	r.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(lim)),
		zstd.WithDecoderMaxWindow(uint64(min(lim, 1<<27))))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	err = guard(func() error {
		var err error
		r.lex, err = mcap.NewLexer(r.cr, &mcap.LexerOptions{ValidateChunkCRCs: true, MaxRecordSize: lim, MaxDecompressedChunkSize: lim,
			Decompressors: map[mcap.CompressionFormat]mcap.ResettableReader{mcap.CompressionZSTD: r.zstd}})
		return err
	})
	if err != nil {
		r.zstd.Close()
		f.Close()
		return nil, fmt.Errorf("recording %s: not an MCAP file: %w", name, err)
	}
	return r, nil
}

// guard runs fn, turning a panic of the MCAP library on malformed input
// (v1.7.3 slices a fixed buffer with a length read from the chunk header)
// into an error.
func guard(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed record (mcap library: %v)", p)
		}
	}()
	return fn()
}

// Path names the recording read (a path or an s3:// URL).
func (r *Reader) Path() string { return r.path }

// Truncated reports whether the file ended inside a record or a chunk (a
// recording whose writer was killed); the messages before were read.
func (r *Reader) Truncated() bool { return r.truncated }

// Complete reports whether the file's footer was read.
func (r *Reader) Complete() bool { return r.complete }

// Metadata returns the metadata records read so far.
func (r *Reader) Metadata() []mcap.Metadata { return r.metadata }

// Close closes the file or the object's stream.
func (r *Reader) Close() error {
	if r.lex != nil {
		r.lex.Close()
	}
	r.zstd.Close()
	return r.f.Close()
}

// Next returns the next message, io.EOF at the end of the data (also at
// the end of a truncated file: see Truncated).
func (r *Reader) Next(m *Message) error {
	for {
		if r.done {
			return io.EOF
		}
		var tok mcap.TokenType
		var rec []byte
		err := guard(func() error {
			var err error
			tok, rec, err = r.lex.Next(r.buf)
			return err
		})
		if err != nil {
			r.done = true
			if errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && r.cr.n >= r.size {
				r.truncated = !r.complete
				return io.EOF
			}
			if r.cr.n >= r.size {
				// The error happened with the whole file read: a tail cut
				// inside a record or a chunk.
				r.truncated = true
				return io.EOF
			}
			// Short of the size the file or object had when opened: damage,
			// or a stream (an object's GET) that ended early, which is
			// not a killed writer's cut.
			if errors.Is(err, io.EOF) {
				// Not the end of the data: no caller may take it for one.
				return fmt.Errorf("recording %s: at byte %d of %d: the data ends early: %v", r.path, r.cr.n, r.size, err)
			}
			return fmt.Errorf("recording %s: at byte %d of %d: %w", r.path, r.cr.n, r.size, err)
		}
		if cap(rec) > cap(r.buf) {
			r.buf = rec[:0]
		}
		switch tok {
		case mcap.TokenHeader:
			if r.header, err = mcap.ParseHeader(rec); err != nil {
				return r.fail("header", err)
			}
		case mcap.TokenSchema:
			s, err := mcap.ParseSchema(rec)
			if err != nil {
				return r.fail("schema", err)
			}
			s.Data = append([]byte(nil), s.Data...)
			r.schemas[s.ID] = s
		case mcap.TokenChannel:
			c, err := mcap.ParseChannel(rec)
			if err != nil {
				return r.fail("channel", err)
			}
			r.channels[c.ID] = c
		case mcap.TokenMetadata:
			md, err := mcap.ParseMetadata(rec)
			if err != nil {
				return r.fail("metadata", err)
			}
			r.metadata = append(r.metadata, *md)
		case mcap.TokenFooter:
			r.complete = true
		case mcap.TokenMessage:
			var msg mcap.Message
			if err := msg.PopulateFrom(rec, false); err != nil {
				return r.fail("message", err)
			}
			c := r.channels[msg.ChannelID]
			if c == nil {
				return r.fail("message", fmt.Errorf("channel %d was never declared", msg.ChannelID))
			}
			*m = Message{Topic: c.Topic, Encoding: c.MessageEncoding, Sequence: msg.Sequence, LogTime: msg.LogTime, Data: msg.Data,
				ChannelID: c.ID, ChannelMetadata: c.Metadata}
			if s := r.schemas[c.SchemaID]; s != nil {
				m.SchemaName = s.Name
			}
			m.Camera, m.Stream, _ = mcaprec.SplitTopic(c.Topic)
			return nil
		}
	}
}

func (r *Reader) fail(what string, err error) error {
	r.done = true
	return fmt.Errorf("recording %s: %s record near byte %d: %w", r.path, what, r.cr.n, err)
}

// Schema returns the schema data of a topic's channel (nil if unknown).
func (r *Reader) Schema(topic string) (name, encoding string, data []byte) {
	for _, c := range r.channels {
		if c.Topic == topic {
			if s := r.schemas[c.SchemaID]; s != nil {
				return s.Name, s.Encoding, s.Data
			}
		}
	}
	return "", "", nil
}
