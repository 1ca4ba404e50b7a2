package record

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/foxglove/mcap/go/mcap"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/didoedge/didoedge/runtime/record/mcaprec"
)

// channelSpec describes a channel independently of any file; a file
// registers it (and its schema) when the first message arrives.
type channelSpec struct {
	topic          string
	schemaName     string
	schemaEncoding string
	schemaData     []byte
	messageEnc     string
	metadata       map[string]string
}

// countingFile counts the bytes written to the file, which is the file's
// size on disk: the MCAP writer writes every record straight through, so
// a killed process leaves every complete chunk in the page cache.
type countingFile struct {
	f *os.File
	n int64
}

func (c *countingFile) Write(p []byte) (int, error) {
	n, err := c.f.Write(p)
	c.n += int64(n)
	return n, err
}

// mcapFile is one open recording.
type mcapFile struct {
	path     string
	out      *countingFile
	w        *mcap.Writer
	schemas  map[string]uint16
	channels map[int]uint16 // spec index -> channel id
	start    uint64         // log time of the first message (0: none yet)
	frames   int
}

// compressor is the chunk compressor the recorder reuses for all its
// files: one encoder, no goroutines of its own (zstd's default concurrency
// would compete with inference for the cores).
func newCompressor(name string) (mcap.CustomCompressor, error) {
	switch name {
	case "zstd":
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			return nil, fmt.Errorf("zstd encoder: %w", err)
		}
		return mcap.NewCustomCompressor(mcap.CompressionZSTD, enc), nil
	case "lz4":
		lw := lz4.NewWriter(nil)
		if err := lw.Apply(lz4.CompressionLevelOption(lz4.Fast), lz4.ConcurrencyOption(1)); err != nil {
			return nil, fmt.Errorf("lz4 encoder: %w", err)
		}
		return mcap.NewCustomCompressor(mcap.CompressionLZ4, lw), nil
	case "none":
		return nil, nil
	}
	return nil, fmt.Errorf("unknown compression %q", name)
}

// createFile creates path (failing if it exists) and writes the header
// and the metadata records.
func createFile(path string, chunkBytes int64, comp mcap.CustomCompressor, metadata []mcap.Metadata) (*mcapFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	out := &countingFile{f: f}
	opts := &mcap.WriterOptions{Chunked: true, ChunkSize: chunkBytes, IncludeCRC: true, Compressor: comp,
		Compression: mcap.CompressionNone, OverrideLibrary: true}
	w, err := mcap.NewWriter(out, opts)
	if err == nil {
		err = w.WriteHeader(&mcap.Header{Profile: mcaprec.ProfileName, Library: mcaprec.LibraryName})
	}
	for i := 0; err == nil && i < len(metadata); i++ {
		err = w.WriteMetadata(&metadata[i])
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("recording %s: %w", path, err)
	}
	return &mcapFile{path: path, out: out, w: w, schemas: map[string]uint16{}, channels: map[int]uint16{}}, nil
}

// channel returns the channel id of spec idx, registering it first.
func (m *mcapFile) channel(idx int, spec *channelSpec) (uint16, error) {
	if id, ok := m.channels[idx]; ok {
		return id, nil
	}
	sid, ok := m.schemas[spec.schemaName]
	if !ok {
		sid = uint16(len(m.schemas) + 1)
		if err := m.w.WriteSchema(&mcap.Schema{ID: sid, Name: spec.schemaName, Encoding: spec.schemaEncoding, Data: spec.schemaData}); err != nil {
			return 0, fmt.Errorf("recording %s: schema %s: %w", m.path, spec.schemaName, err)
		}
		m.schemas[spec.schemaName] = sid
	}
	id := uint16(len(m.channels))
	if err := m.w.WriteChannel(&mcap.Channel{ID: id, SchemaID: sid, Topic: spec.topic, MessageEncoding: spec.messageEnc,
		Metadata: spec.metadata}); err != nil {
		return 0, fmt.Errorf("recording %s: channel %s: %w", m.path, spec.topic, err)
	}
	m.channels[idx] = id
	return id, nil
}

// write appends one message.
func (m *mcapFile) write(idx int, spec *channelSpec, seq uint32, logTime uint64, data []byte) error {
	id, err := m.channel(idx, spec)
	if err != nil {
		return err
	}
	if m.start == 0 {
		m.start = logTime
	}
	if err := m.w.WriteMessage(&mcap.Message{ChannelID: id, Sequence: seq, LogTime: logTime, PublishTime: logTime, Data: data}); err != nil {
		return fmt.Errorf("recording %s: %s: %w", m.path, spec.topic, err)
	}
	return nil
}

// size is the number of bytes on disk so far (the active chunk, at most
// chunk_bytes before compression, is still in memory).
func (m *mcapFile) size() int64 { return m.out.n }

// close writes the last chunk, the extra metadata and the summary.
func (m *mcapFile) close(extra []mcap.Metadata) error {
	var err error
	for i := range extra {
		err = errors.Join(err, m.w.WriteMetadata(&extra[i]))
	}
	err = errors.Join(err, m.w.Close(), m.out.f.Close())
	if err != nil {
		return fmt.Errorf("close recording %s: %w", m.path, err)
	}
	return nil
}

// abort closes the file without a summary (after a write error).
func (m *mcapFile) abort() { _ = m.out.f.Close() }

var _ io.Writer = (*countingFile)(nil)
