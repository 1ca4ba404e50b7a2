package offline

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/dataset"
	"github.com/didoedge/didoedge/offline/depthtrain"
	"github.com/didoedge/didoedge/runtime/infer"
)

// frameSource yields the frames an AuxUE trains or validates on.
type frameSource interface {
	Len() int
	// Frame returns frame i (its maps may be reused by the next call).
	Frame(i int) (*dataset.Sample, error)
	// Identity describes the frames for the cache key.
	Identity() any
}

// simPool draws frames from the on-the-fly simulated pool (SimSource):
// frame i is the i-th draw of a PCG seeded by the seed.
type simPool struct {
	src   *depthtrain.SimSource
	pairs [][2]int
	id    map[string]any
}

func newSimPool(seed int64, drives, framesPerDrive, width, height, frames int, firstDrive int, stream uint64) (*simPool, error) {
	src, err := depthtrain.NewSimSource(seed, firstDrive+drives, framesPerDrive, width, height)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(seed), stream))
	p := &simPool{src: src, pairs: make([][2]int, frames), id: map[string]any{
		"pool": "sim outdoor", "seed": seed, "drives": drives, "first_drive": firstDrive, "frames_per_drive": framesPerDrive,
		"width": width, "height": height, "frames": frames, "stream": stream}}
	for i := range p.pairs {
		p.pairs[i] = [2]int{firstDrive + rng.IntN(drives), rng.IntN(framesPerDrive)}
	}
	return p, nil
}

func (p *simPool) Len() int      { return len(p.pairs) }
func (p *simPool) Identity() any { return p.id }

func (p *simPool) Frame(i int) (*dataset.Sample, error) {
	d, k := p.pairs[i][0], p.pairs[i][1]
	f, err := p.src.Render(d, k)
	if err != nil {
		return nil, err
	}
	return &dataset.Sample{Drive: fmt.Sprintf("sim_drive_%d", d), Frame: k, Name: fmt.Sprintf("sim drive %d frame %d", d, k),
		Width: f.Width, Height: f.Height, RGB: f.RGB, Sparse: f.Sparse, Semantic: f.Semantic}, nil
}

// dataFrames reads the frames of a split of a data set on disk.
type dataFrames struct {
	set   dataset.Set
	items []dataset.Item
	id    map[string]any
	// withoutTruth: frames without ground truth are served too (the
	// domain statistics need none: picture folders, footage).
	withoutTruth bool
}

// openDataFrames lists a split (at most max frames, evenly spread, 0 = all).
func openDataFrames(src dataset.Source, split string, max int) (*dataFrames, error) {
	set, err := dataset.Open(src)
	if err != nil {
		return nil, err
	}
	items, err := set.Items(split)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("data set %q: the %s split has no frames", src.Dir, split)
	}
	if max > 0 && len(items) > max {
		picked := make([]dataset.Item, max)
		for i := range picked {
			picked[i] = items[i*len(items)/max]
		}
		items = picked
	}
	abs := src.Dir
	if src.FS == nil {
		if abs, err = filepath.Abs(src.Dir); err != nil {
			return nil, err
		}
	}
	names := sha256.New()
	for _, it := range items {
		fmt.Fprintf(names, "%s %d %c %s %s\n", it.Drive, it.Frame, it.Side, it.RGBPath, it.DepthPath)
	}
	id := map[string]any{"dir": abs, "layout": set.Layout(), "split": split, "frames": len(items),
		"items_sha256": hex.EncodeToString(names.Sum(nil))}
	fsys := src.FS
	if fsys == nil {
		fsys = os.DirFS(src.Dir)
	}
	if b, err := fs.ReadFile(fsys, dataset.MetaFile); err == nil {
		sum := sha256.Sum256(b)
		id["meta_sha256"] = hex.EncodeToString(sum[:])
	}
	return &dataFrames{set: set, items: items, id: id}, nil
}

func (d *dataFrames) Len() int      { return len(d.items) }
func (d *dataFrames) Identity() any { return d.id }

func (d *dataFrames) Frame(i int) (*dataset.Sample, error) {
	s, err := d.set.Load(d.items[i])
	if err != nil {
		return nil, err
	}
	if s.Sparse == nil && !d.withoutTruth {
		return nil, fmt.Errorf("frame %s has no ground truth (an AuxUE learns from the depth model's errors on it; --teacher labels frames without it)", s.Name)
	}
	return s, nil
}

// Sky labels of a grid block in the cache.
const (
	blockUnlabeled = 0 // the data set has no semantic labels
	blockSky       = 1 // most of the block's frame pixels are sky
	blockOther     = 2
)

// trainingRecord is one frame's training tensors on the AuxUE's grid.
type trainingRecord struct {
	feats  []float32 // C x g features (the input contract)
	errs   []float32 // g block errors; -1 = no ground truth in the block
	sky    []uint8   // g block labels
	absRel float64   // the depth model's AbsRel on the frame (aligned for a relative model); NaN without ground truth
	// labels are the frame's LabelCounts (recordLayout.Labels).
	labels []uint32
}

// recordLayout sizes a record.
type recordLayout struct {
	C, G int
	// Labels: the record ends with its frame's LabelCounts (a run with a
	// teacher).
	Labels bool
}

func (l recordLayout) bytes() int {
	n := 4*l.C*l.G + 4*l.G + l.G + 8
	if l.Labels {
		n += 4 * labelFields
	}
	return n
}

func (l recordLayout) newRecord() *trainingRecord {
	r := &trainingRecord{feats: make([]float32, l.C*l.G), errs: make([]float32, l.G), sky: make([]uint8, l.G)}
	if l.Labels {
		r.labels = make([]uint32, labelFields)
	}
	return r
}

func (l recordLayout) encode(r *trainingRecord, b []byte) {
	o := 0
	for _, v := range r.feats {
		binary.LittleEndian.PutUint32(b[o:], math.Float32bits(v))
		o += 4
	}
	for _, v := range r.errs {
		binary.LittleEndian.PutUint32(b[o:], math.Float32bits(v))
		o += 4
	}
	copy(b[o:], r.sky)
	o += len(r.sky)
	binary.LittleEndian.PutUint64(b[o:], math.Float64bits(r.absRel))
	o += 8
	for _, v := range r.labels {
		binary.LittleEndian.PutUint32(b[o:], v)
		o += 4
	}
}

func (l recordLayout) decode(b []byte, r *trainingRecord) {
	o := 0
	for i := range r.feats {
		r.feats[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[o:]))
		o += 4
	}
	for i := range r.errs {
		r.errs[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[o:]))
		o += 4
	}
	copy(r.sky, b[o:o+len(r.sky)])
	o += len(r.sky)
	r.absRel = math.Float64frombits(binary.LittleEndian.Uint64(b[o:]))
	o += 8
	for i := range r.labels {
		r.labels[i] = binary.LittleEndian.Uint32(b[o:])
		o += 4
	}
}

// preparer turns a frame and the depth model's pass into a record: the
// contract's features, the block errors and the sky labels.
type preparer struct {
	contract auxue.InputContract
	relative bool
	maxDepth float64
	sc       auxue.ContractScratch
	aligned  []float32
	sums     []float64
	counts   []int32
	skyN     []int32
	allN     []int32
}

// prepare fills rec. Errors are computed at the frame's size, where the
// ground truth lives: |d - y| in metres, or for a relative model |d - y|/y
// after aligning the frame to its ground truth (least squares in inverse
// depth); each ground-truth pixel goes to the grid block of the input
// pixel it lands on, and a block's error is the mean over its pixels.
func (p *preparer) prepare(s *dataset.Sample, dp infer.DepthPass, rec *trainingRecord) error {
	c := p.contract
	var feat []float32
	if c.Model != nil {
		if len(dp.Tensors) == 0 {
			return fmt.Errorf("frame %s: the depth model's tensor %q was not exposed", s.Name, c.Model.Tensor)
		}
		feat = dp.Tensors[0]
	}
	if err := c.FeaturesWith(dp.Image, dp.Depth, feat, rec.feats, &p.sc); err != nil {
		return err
	}
	gh, gw := c.Grid()
	g := gh * gw
	if len(p.sums) != g {
		p.sums, p.counts, p.skyN, p.allN = make([]float64, g), make([]int32, g), make([]int32, g), make([]int32, g)
	}
	clear(p.sums)
	clear(p.counts)
	clear(p.skyN)
	clear(p.allN)
	depth := dp.Frame
	if p.relative {
		if len(p.aligned) != len(depth) {
			p.aligned = make([]float32, len(depth))
		}
		a, err := metrics.AlignInverseDepth(depth, s.Sparse)
		if err != nil {
			return fmt.Errorf("frame %s: %w", s.Name, err)
		}
		a.Apply(depth, p.aligned, p.maxDepth)
		depth = p.aligned
	}
	geo := dp.Geometry
	f := c.Factor
	var rel float64
	var nrel int
	for y := 0; y < s.Height; y++ {
		for x := 0; x < s.Width; x++ {
			in := geo.InputPixel(x, y)
			if in < 0 {
				continue
			}
			cell := (in/geo.InW/f)*gw + (in%geo.InW)/f
			i := y*s.Width + x
			p.allN[cell]++
			if s.Semantic != nil && s.Semantic[i] == metrics.SkyClass {
				p.skyN[cell]++
			}
			gt, d := s.Sparse[i], depth[i]
			if !(gt > 0) || !(d > 0) {
				continue
			}
			e := math.Abs(float64(d - gt))
			rel += e / float64(gt)
			nrel++
			if p.relative {
				e /= float64(gt)
			}
			p.sums[cell] += e
			p.counts[cell]++
		}
	}
	for k := range rec.errs {
		rec.errs[k] = -1
		if p.counts[k] > 0 {
			rec.errs[k] = float32(p.sums[k] / float64(p.counts[k]))
		}
		rec.sky[k] = blockUnlabeled
		if s.Semantic != nil && p.allN[k] > 0 {
			rec.sky[k] = blockOther
			if 2*p.skyN[k] > p.allN[k] {
				rec.sky[k] = blockSky
			}
		}
	}
	rec.absRel = math.NaN()
	if nrel > 0 {
		rec.absRel = rel / float64(nrel)
	}
	return nil
}

// frameCache is an append-only file of fixed-size records keyed by what
// decides them (cacheKey); an interrupted run leaves whole records, which
// the next run with the same key keeps.
type frameCache struct {
	dir    string
	layout recordLayout
	f      *os.File
	n      int // complete records
	buf    []byte
	temp   bool
}

// cacheMeta is DIR/meta.json of a cache.
type cacheMeta struct {
	Version  int             `json:"version"`
	Key      json.RawMessage `json:"key"`
	Channels int             `json:"channels"`
	Grid     [2]int          `json:"grid"`
	Record   int             `json:"record_bytes"`
	Created  string          `json:"created"`
}

// openCache opens (or creates) the cache for key under root; root ""
// makes a temporary one, removed by Close.
func openCache(root string, key any, layout recordLayout, grid [2]int) (*frameCache, error) {
	c := &frameCache{layout: layout, buf: make([]byte, layout.bytes())}
	dir, kj, temp, err := keyedCacheDir(root, "auxue", key)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	c.dir, c.temp = dir, temp
	metaPath := filepath.Join(c.dir, "meta.json")
	want := cacheMeta{Version: 1, Key: kj, Channels: layout.C, Grid: grid, Record: layout.bytes(), Created: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile(metaPath); err == nil {
		var have cacheMeta
		var compact bytes.Buffer
		err := json.Unmarshal(b, &have)
		if err == nil {
			err = json.Compact(&compact, have.Key)
		}
		if err != nil || have.Version != 1 || compact.String() != string(kj) || have.Record != want.Record {
			return nil, fmt.Errorf("cache %q: meta.json does not match this run's key (delete the directory to rebuild it)", c.dir)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		b, _ := json.MarshalIndent(want, "", "  ")
		if err := os.WriteFile(metaPath, append(b, '\n'), 0o644); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
	} else {
		return nil, fmt.Errorf("cache: %w", err)
	}
	path := filepath.Join(c.dir, "frames.bin")
	if c.f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	st, err := c.f.Stat()
	if err != nil {
		c.f.Close()
		return nil, fmt.Errorf("cache: %w", err)
	}
	c.n = int(st.Size()) / layout.bytes()
	if err := c.f.Truncate(int64(c.n * layout.bytes())); err != nil { // drop a partial record
		c.f.Close()
		return nil, fmt.Errorf("cache: %w", err)
	}
	return c, nil
}

// append writes record number c.n.
func (c *frameCache) append(r *trainingRecord) error {
	c.layout.encode(r, c.buf)
	if _, err := c.f.WriteAt(c.buf, int64(c.n*len(c.buf))); err != nil {
		return fmt.Errorf("cache %q: %w", c.dir, err)
	}
	c.n++
	return nil
}

// read loads record i into r.
func (c *frameCache) read(i int, r *trainingRecord) error {
	if _, err := c.f.ReadAt(c.buf, int64(i*len(c.buf))); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("cache %q record %d: %w", c.dir, i, err)
	}
	c.layout.decode(c.buf, r)
	return nil
}

// size is the cache's bytes on disk.
func (c *frameCache) size() int64 { return int64(c.n * len(c.buf)) }

func (c *frameCache) Close() error {
	err := c.f.Close()
	if c.temp {
		err = errors.Join(err, os.RemoveAll(c.dir))
	}
	return err
}

// describeKey is a short text of a cache key for logs.
func describeKey(key any) string {
	b, _ := json.Marshal(key)
	s := string(b)
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return strings.ReplaceAll(s, `"`, "")
}

// keyedCacheDir is the directory of a cache whose content is determined
// by key: root/NAME-<the first 8 bytes of sha256(key's JSON)>, created if
// missing, or with root "" a temporary directory (temp: the caller
// removes it). kj is the key's JSON, which the caller stores and compares
// in the cache's meta.json.
func keyedCacheDir(root, name string, key any) (dir string, kj []byte, temp bool, err error) {
	if kj, err = json.Marshal(key); err != nil {
		return "", nil, false, err
	}
	if root == "" {
		dir, err = os.MkdirTemp("", "didoedge-"+name+"-cache-")
		return dir, kj, true, err
	}
	sum := sha256.Sum256(kj)
	dir = filepath.Join(root, name+"-"+hex.EncodeToString(sum[:8]))
	return dir, kj, false, os.MkdirAll(dir, 0o755)
}
