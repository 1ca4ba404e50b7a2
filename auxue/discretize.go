package auxue

import (
	"fmt"
	"math"
)

// Discretizer splits prediction errors into K equal-frequency bins (paper
// 3.2.1 and supplementary C.1): bin 0 holds the smallest errors, bin K-1 the
// largest. It keeps its buffers between calls, so steady-state use does not
// allocate; it is not safe for concurrent use.
//
// Tie rule. Equal errors always share a bin (the network cannot tell them
// apart, so splitting them would ask for two different answers to the same
// question). Bins are then filled greedily from the smallest error upwards:
// bin k receives whole groups of equal values until its size is as close as
// possible to (remaining values)/(remaining bins), taking at least one group
// and leaving at least one group for each later bin. A group larger than
// that target therefore fills a bin alone and the remaining values are
// re-spread evenly over the remaining bins. With distinct values every bin
// holds floor(J/K) or ceil(J/K) of the J values, as in the paper.
//
// When fewer distinct values remain than bins (e.g. K larger than the number
// of valid pixels, or all errors equal), each remaining group gets its own
// bin, spread evenly from the lowest remaining bin to bin K-1 (a single
// group takes the lowest remaining bin, so an all-equal map lands in bin 0);
// the bins in between stay empty.
type Discretizer struct {
	k      int
	sorted []uint32  // scratch: order-preserving keys of the valid values, sorted
	tmp    []uint32  // radix-sort scratch
	upper  []float32 // inclusive upper edge of each non-empty bin, ascending
	ids    []int32   // bin index of each entry of upper
	counts [radixPasses][1 << radixBits]int
}

const (
	radixBits   = 11
	radixPasses = 3 // 33 bits cover a 32-bit key
)

// sortKey maps a finite float32 to a uint32 with the same order; -0 and +0
// share a key because they are equal errors.
func sortKey(v float32) uint32 {
	if v == 0 {
		v = 0 // -0 -> +0
	}
	u := math.Float32bits(v)
	if u&0x80000000 != 0 {
		return ^u
	}
	return u | 0x80000000
}

func keyValue(k uint32) float32 {
	if k&0x80000000 != 0 {
		return math.Float32frombits(k &^ 0x80000000)
	}
	return math.Float32frombits(^k)
}

// radixSort sorts keys in place (LSD, 3 passes of 11 bits), using d.tmp.
func (d *Discretizer) radixSort(keys []uint32) {
	if cap(d.tmp) < len(keys) {
		d.tmp = make([]uint32, len(keys))
	}
	tmp := d.tmp[:len(keys)]
	for p := range d.counts {
		clear(d.counts[p][:])
	}
	for _, k := range keys {
		for p := 0; p < radixPasses; p++ {
			d.counts[p][(k>>(p*radixBits))&(1<<radixBits-1)]++
		}
	}
	src, dst := keys, tmp
	for p := 0; p < radixPasses; p++ {
		c := &d.counts[p]
		sum := 0
		for i, n := range c {
			c[i], sum = sum, sum+n
		}
		shift := p * radixBits
		for _, k := range src {
			b := (k >> shift) & (1<<radixBits - 1)
			dst[c[b]] = k
			c[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] { // odd number of passes: the result is in tmp
		copy(keys, src)
	}
}

// NewDiscretizer returns a Discretizer for k >= 2 bins.
func NewDiscretizer(k int) (*Discretizer, error) {
	if k < 2 {
		return nil, fmt.Errorf("discretizer: K = %d, want at least 2 bins", k)
	}
	return &Discretizer{k: k, upper: make([]float32, 0, k), ids: make([]int32, 0, k)}, nil
}

// K returns the number of bins.
func (d *Discretizer) K() int { return d.k }

// Edges returns the fitted bins: ids[i] holds the values in (upper[i-1], upper[i]]
// (the first also everything below, the last everything above). Empty bins do
// not appear. The slices are views, valid until the next Fit.
func (d *Discretizer) Edges() (upper []float32, ids []int32) { return d.upper, d.ids }

// Fit computes the bins from the valid values (valid may be nil: all valid)
// and returns how many values were valid. A non-finite valid value is an
// error naming its index. With no valid value the Discretizer has no bins and
// Assign marks everything -1.
func (d *Discretizer) Fit(values []float32, valid []bool) (int, error) {
	if valid != nil && len(valid) != len(values) {
		return 0, fmt.Errorf("discretize: valid mask has %d values, errors %d", len(valid), len(values))
	}
	d.sorted = d.sorted[:0]
	for i, v := range values {
		if valid != nil && !valid[i] {
			continue
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return 0, fmt.Errorf("discretize: error value at index %d is %v", i, v)
		}
		d.sorted = append(d.sorted, sortKey(v))
	}
	d.upper, d.ids = d.upper[:0], d.ids[:0]
	s := d.sorted
	if len(s) == 0 {
		return 0, nil
	}
	d.radixSort(s)
	groups := 1
	for i := 1; i < len(s); i++ {
		if s[i] != s[i-1] {
			groups++
		}
	}
	// groupEnd returns the index one past the group of equal values starting at i.
	groupEnd := func(i int) int {
		j := i + 1
		for j < len(s) && s[j] == s[i] {
			j++
		}
		return j
	}
	pos, left := 0, groups
	for k := 0; k < d.k && pos < len(s); k++ {
		bins := d.k - k
		if left <= bins {
			// Spread the remaining groups over the remaining bins.
			for g := 0; g < left; g++ {
				bin := k
				if left > 1 {
					bin += (2*g*(bins-1) + left - 1) / (2 * (left - 1))
				}
				pos = groupEnd(pos)
				d.upper = append(d.upper, keyValue(s[pos-1]))
				d.ids = append(d.ids, int32(bin))
			}
			break
		}
		target := float64(len(s)-pos) / float64(bins)
		end, taken := groupEnd(pos), 1
		for taken < left-(bins-1) {
			next := groupEnd(end)
			size := float64(end - pos)
			if math.Abs(size+float64(next-end)-target) >= math.Abs(size-target) {
				break
			}
			end, taken = next, taken+1
		}
		d.upper = append(d.upper, keyValue(s[end-1]))
		d.ids = append(d.ids, int32(k))
		pos, left = end, left-taken
	}
	return len(s), nil
}

// Assign writes the bin of each value into bins (-1 where valid is false, or
// everywhere when the last Fit saw no valid value). Values between two fitted
// bins go to the upper one; values beyond the fitted range to the first or last.
func (d *Discretizer) Assign(values []float32, valid []bool, bins []int32) error {
	if len(bins) != len(values) || (valid != nil && len(valid) != len(values)) {
		return fmt.Errorf("discretize: %d errors, %d bins, %d mask values", len(values), len(bins), len(valid))
	}
	last := len(d.upper) - 1
	for i, v := range values {
		if last < 0 || (valid != nil && !valid[i]) {
			bins[i] = -1
			continue
		}
		if v-v != 0 { // NaN or ±Inf
			return fmt.Errorf("discretize: error value at index %d is %v", i, v)
		}
		// First fitted edge >= v: branch-free lower bound (the data are
		// random, so a branchy binary search mispredicts on most steps).
		base, n := 0, last+1
		for n > 1 {
			half := n / 2
			if d.upper[base+half] < v {
				base += half
			}
			n -= half
		}
		lo := base
		if d.upper[base] < v && base < last {
			lo++
		}
		bins[i] = d.ids[lo]
	}
	return nil
}

// Dataset discretizes per data set (image-level tasks, 1D signals): one Fit
// over all valid values, then Assign. It returns the number of valid values.
func (d *Discretizer) Dataset(values []float32, valid []bool, bins []int32) (int, error) {
	n, err := d.Fit(values, valid)
	if err != nil {
		return 0, err
	}
	return n, d.Assign(values, valid, bins)
}

// PerImage discretizes n error maps of hw pixels each (pixel-wise tasks),
// each over its own valid pixels. An image without valid pixels gets -1
// everywhere; that is not an error.
func (d *Discretizer) PerImage(values []float32, valid []bool, n, hw int, bins []int32) error {
	if n < 0 || hw <= 0 || len(values) != n*hw || len(bins) != n*hw || (valid != nil && len(valid) != n*hw) {
		return fmt.Errorf("discretize: %d images of %d pixels need %d errors and bins, got %d errors, %d bins, %d mask values",
			n, hw, n*hw, len(values), len(bins), len(valid))
	}
	for i := 0; i < n; i++ {
		lo, hi := i*hw, (i+1)*hw
		var m []bool
		if valid != nil {
			m = valid[lo:hi]
		}
		if _, err := d.Fit(values[lo:hi], m); err != nil {
			return fmt.Errorf("image %d: %w", i, err)
		}
		if err := d.Assign(values[lo:hi], m, bins[lo:hi]); err != nil {
			return fmt.Errorf("image %d: %w", i, err)
		}
	}
	return nil
}
