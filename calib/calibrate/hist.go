package calibrate

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// MantissaBits is the resolution of Hist: every octave [2^k, 2^(k+1)) is
// cut into 2^MantissaBits equal bins (a value's bin is its float64 bit
// pattern with all but the top MantissaBits mantissa bits dropped). A bin
// is therefore at most 2^-10 = 0.098 % of the values it holds wide: for
// K/S in [0.5, 1) it is 2^-11 = 4.9e-4 wide, in [0.25, 0.5) 2.4e-4. The
// bins are fixed (independent of the data), so histograms of shards add
// exactly, and one range fits K/S in (0,1], b/depth and |e|/b alike.
//
// Why 2^-10 is fine for thresholds that are (1-FAR)-quantiles: moving a
// threshold within its bin changes the fraction of pixels above it by at
// most the pixels in that bin; with N calibration pixels the quantile
// itself is only known to about sqrt(q(1-q)/N) of the mass (one standard
// error: 3e-4 at q = 0.99 and N = 1e5 pixels, a single 640x192 frame has
// 1.2e5), so a bin that holds less than that mass does not change what the
// data can say. TestMergedThresholdsWithinOneBin reports the mass the
// chosen bins hold on real model outputs; the figures written in the
// calibration file are printed to 4 significant digits anyway.
const MantissaBits = 10

const histShift = 52 - MantissaBits

// Hist is an exact, fixed-bin histogram of non-negative finite values
// (bins of MantissaBits, above). Add is exact counting; Merge adds two
// histograms bin by bin, so any split of the data into shards merges into
// the histogram of the whole. The zero value is empty and ready.
type Hist struct {
	bins map[uint64]int64
	n    int64
}

// HistKey is the bin of v (v >= 0 finite).
func HistKey(v float64) uint64 { return math.Float64bits(v) >> histShift }

// HistUpper is the upper edge of bin k: every value of the bin is < it.
func HistUpper(k uint64) float64 { return math.Float64frombits((k + 1) << histShift) }

// HistLower is the lower edge of bin k: every value of the bin is >= it.
func HistLower(k uint64) float64 { return math.Float64frombits(k << histShift) }

// Add counts v; negative, NaN and infinite values are not counted and make
// Add return false (the callers only add values they validated).
func (h *Hist) Add(v float64) bool {
	if !(v >= 0) || math.IsInf(v, 1) {
		return false
	}
	if h.bins == nil {
		h.bins = map[uint64]int64{}
	}
	h.bins[HistKey(v)]++
	h.n++
	return true
}

// N is the number of values counted.
func (h *Hist) N() int64 { return h.n }

// Merge adds o's counts to h.
func (h *Hist) Merge(o *Hist) {
	if o.n == 0 {
		return
	}
	if h.bins == nil {
		h.bins = map[uint64]int64{}
	}
	for k, c := range o.bins {
		h.bins[k] += c
	}
	h.n += o.n
}

func (h *Hist) keys() []uint64 {
	ks := make([]uint64, 0, len(h.bins))
	for k := range h.bins {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// QuantileBin is the bin holding the nearest-rank q-quantile (the
// ceil(q n)-th smallest value, as Quantile) and how many values that bin
// holds. ok is false for an empty histogram, or one whose bins sum to
// fewer than its count (a damaged summary).
func (h *Hist) QuantileBin(q float64) (key uint64, count int64, ok bool) {
	if h.n == 0 {
		return 0, 0, false
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	rank = max(1, min(rank, h.n))
	var cum int64
	for _, k := range h.keys() {
		cum += h.bins[k]
		if cum >= rank {
			return k, h.bins[k], true
		}
	}
	// The bins sum to fewer than n: a damaged summary. No quantile.
	return 0, 0, false
}

// Quantile is the upper edge of the bin of the nearest-rank q-quantile:
// the exact quantile x lies in [HistLower, HistUpper) of that bin, so the
// result is above x by less than one bin, and at most a fraction 1-q of the
// values exceed it (the false-alarm bound holds, conservatively). NaN for
// an empty histogram.
func (h *Hist) Quantile(q float64) float64 {
	k, _, ok := h.QuantileBin(q)
	if !ok {
		return math.NaN()
	}
	return HistUpper(k)
}

// CountBelow counts the values in bins whose upper edge is <= t: exactly
// the values < t when t is a bin edge, otherwise those below the lower
// edge of t's bin (at most one bin's count short).
func (h *Hist) CountBelow(t float64) int64 {
	var c int64
	for k, n := range h.bins {
		if HistUpper(k) <= t {
			c += n
		}
	}
	return c
}

// histJSON is Hist on disk: sorted bin keys and their counts.
type histJSON struct {
	Keys   []uint64 `json:"keys"`
	Counts []int64  `json:"counts"`
}

// MarshalJSON writes the non-empty bins, sorted.
func (h Hist) MarshalJSON() ([]byte, error) {
	j := histJSON{Keys: h.keys(), Counts: []int64{}}
	for _, k := range j.Keys {
		j.Counts = append(j.Counts, h.bins[k])
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads MarshalJSON's form; keys must be increasing and
// counts positive.
func (h *Hist) UnmarshalJSON(b []byte) error {
	var j histJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.Keys) != len(j.Counts) {
		return fmt.Errorf("histogram: %d keys, %d counts", len(j.Keys), len(j.Counts))
	}
	*h = Hist{}
	for i, k := range j.Keys {
		if i > 0 && k <= j.Keys[i-1] {
			return fmt.Errorf("histogram: keys not increasing at %d", i)
		}
		if j.Counts[i] <= 0 {
			return fmt.Errorf("histogram: count %d of key %d", j.Counts[i], k)
		}
		if k >= 0x7ff<<MantissaBits { // sign bit, infinities and NaNs
			return fmt.Errorf("histogram: key %d is not a bin of a non-negative finite value", k)
		}
		if h.bins == nil {
			h.bins = map[uint64]int64{}
		}
		h.bins[k] = j.Counts[i]
		h.n += j.Counts[i]
	}
	return nil
}
