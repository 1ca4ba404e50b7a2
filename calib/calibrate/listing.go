package calibrate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/didoedge/didoedge/dataset"
)

// Input is one data set a calibration reads: a directory in any layout
// dataset.Open knows (a sim render, real KITTI, NYU, or the KITTI layout
// `record export` writes from a recording). FS, when set, reads it (an S3
// prefix); Dir then names it in the listing, the identities and errors,
// so that shards reading the same s3:// URLs agree on the listing.
type Input struct {
	Dir, Layout, KITTIDepth string
	FS, KITTIDepthFS        fs.FS
}

// entry is one frame of the listing: its data set and item.
type entry struct {
	src  int // index into listing.sets
	item dataset.Item
	key  string // the data set's Dir, then the item, sortable
}

// listing is the sorted list of every frame of every input, the unit that
// shards slice: a shard is the contiguous slice [i n/k, (i+1) n/k) of it,
// so shards are disjoint, cover the listing and depend only on the inputs.
type listing struct {
	inputs  []Input
	sets    []dataset.Set
	entries []entry
	sha256  string // of the entries' keys, in order: the listing's identity
}

// itemKey spells an item so that keys sort by drive then frame.
func itemKey(it dataset.Item) string {
	return fmt.Sprintf("%s\x00%012d\x00%c\x00%s", it.Drive, it.Frame, it.Side, it.RGBPath)
}

// listInputs opens every input, takes the split's items (the first
// maxFrames of each when maxFrames > 0) and sorts them all.
func listInputs(inputs []Input, split string, maxFrames int) (*listing, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("calibrate: no data set given")
	}
	l := &listing{inputs: slices.Clone(inputs)}
	slices.SortFunc(l.inputs, func(a, b Input) int { return strings.Compare(a.Dir, b.Dir) })
	for i, in := range l.inputs {
		if i > 0 && in.Dir == l.inputs[i-1].Dir {
			return nil, fmt.Errorf("calibrate: data set %q given twice (its frames would count twice)", in.Dir)
		}
		ds, err := dataset.Open(dataset.Source{Dir: in.Dir, FS: in.FS, Layout: in.Layout, KITTIDepth: in.KITTIDepth, KITTIDepthFS: in.KITTIDepthFS})
		if err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		items, err := ds.Items(split)
		if err != nil {
			return nil, fmt.Errorf("calibrate: data set %q: %w", in.Dir, err)
		}
		if maxFrames > 0 && len(items) > maxFrames {
			items = items[:maxFrames]
		}
		if len(items) == 0 {
			return nil, fmt.Errorf("calibrate: data set %q has no %s frames", in.Dir, split)
		}
		l.sets = append(l.sets, ds)
		for _, it := range items {
			l.entries = append(l.entries, entry{src: i, item: it, key: in.Dir + "\x00" + itemKey(it)})
		}
	}
	slices.SortStableFunc(l.entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	h := sha256.New()
	for _, e := range l.entries {
		h.Write([]byte(e.key))
		h.Write([]byte{'\n'})
	}
	l.sha256 = hex.EncodeToString(h.Sum(nil))
	return l, nil
}

// ShardRange is the slice [lo, hi) of n listing entries that shard index
// of count takes: contiguous, disjoint between shards, covering 0..n.
func ShardRange(n, index, count int) (lo, hi int, err error) {
	if count < 1 || index < 0 || index >= count {
		return 0, 0, fmt.Errorf("calibrate: shard index %d of %d: want 0 <= index < count", index, count)
	}
	return index * n / count, (index + 1) * n / count, nil
}
