package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
)

// Row is one line of the long results table: the mean and sample standard
// deviation (n-1; 0 for one seed) of a metric over the seeds.
type Row struct {
	Method     string  `json:"method"`
	Experiment string  `json:"experiment"`
	Corruption string  `json:"corruption"`
	Severity   int     `json:"severity"`
	Metric     string  `json:"metric"`
	Mean       float64 `json:"mean"`
	Std        float64 `json:"std"`
	Seeds      int     `json:"seeds"`
}

// Meta describes how the results were made.
type Meta struct {
	Config      string             `json:"config"`
	ConfigHash  string             `json:"config_hash"`
	Command     string             `json:"command"`
	Machine     string             `json:"machine"`
	Started     string             `json:"started"`
	WallSeconds map[string]float64 `json:"wall_seconds"`
	MainModel   string             `json:"main_model"`
	Sizes       map[string]int     `json:"sizes"`
	Notes       []string           `json:"notes,omitempty"`
}

// Results is results.json.
type Results struct {
	Runs []Row `json:"runs"`
	Meta Meta  `json:"meta"`
}

// Experiments and metric names of the table.
const (
	ExpMainTask      = "main_task"
	ExpAleatoric     = "aleatoric"
	ExpSky           = "sky"
	ExpDatasetChange = "dataset_change"
	ExpTabular       = "tabular"

	CorrClean = "clean"
	CorrMean  = "mean" // per seed, the mean over the corruptions of one severity
)

// MetricNames lists every metric name results.json may hold.
var MetricNames = []string{"absrel", "rmse", "ause_rel", "ause_rmse", "aurg_rel", "aurg_rmse", "auc", "aupr", "sky_all", "uce", "mse"}

type rowKey struct {
	method, exp, corr string
	sev               int
	metric            string
}

// table collects per-seed values.
type table struct {
	nSeeds int
	vals   map[rowKey][]float64
	order  []rowKey
}

func newTable(nSeeds int) *table { return &table{nSeeds: nSeeds, vals: map[rowKey][]float64{}} }

func (t *table) set(k rowKey, seed int, v float64) {
	s, ok := t.vals[k]
	if !ok {
		s = make([]float64, t.nSeeds)
		for i := range s {
			s[i] = math.NaN()
		}
		t.vals[k] = s
		t.order = append(t.order, k)
	}
	s[seed] = v
}

// addCorruptionMeans adds, per seed, the mean over corruptions of each
// (method, experiment, severity, metric) as corruption CorrMean.
func (t *table) addCorruptionMeans() {
	type g struct {
		method, exp string
		sev         int
		metric      string
	}
	sums := map[g][]float64{}
	cnts := map[g][]int{}
	var order []g
	for _, k := range t.order {
		if k.corr == CorrClean || k.corr == CorrMean || k.sev == 0 {
			continue
		}
		key := g{k.method, k.exp, k.sev, k.metric}
		if _, ok := sums[key]; !ok {
			sums[key], cnts[key] = make([]float64, t.nSeeds), make([]int, t.nSeeds)
			order = append(order, key)
		}
		for i, v := range t.vals[k] {
			if !math.IsNaN(v) {
				sums[key][i] += v
				cnts[key][i]++
			}
		}
	}
	for _, key := range order {
		for i := range sums[key] {
			v := math.NaN()
			if cnts[key][i] > 0 {
				v = sums[key][i] / float64(cnts[key][i])
			}
			t.set(rowKey{key.method, key.exp, CorrMean, key.sev, key.metric}, i, v)
		}
	}
}

func meanStd(v []float64) (mean, std float64, n int) {
	var s, first float64
	same := true
	for _, x := range v {
		if !math.IsNaN(x) {
			if n == 0 {
				first = x
			}
			same = same && x == first
			s += x
			n++
		}
	}
	if n == 0 {
		return math.NaN(), math.NaN(), 0
	}
	if same {
		// Equal values (the frozen main model, a deterministic baseline):
		// (v+v+v)/3 can miss v by an ulp and leave a spread of 1e-17.
		return first, 0, n
	}
	mean = s / float64(n)
	if n < 2 {
		return mean, 0, n
	}
	var q float64
	for _, x := range v {
		if !math.IsNaN(x) {
			q += (x - mean) * (x - mean)
		}
	}
	return mean, math.Sqrt(q / float64(n-1)), n
}

// rows aggregates the seeds. A metric undefined for every seed (no
// positives, say) is left out; one that is infinite (an exploding scale
// read-out) is left out and named in dropped, since JSON has no infinity.
func (t *table) rows() (out []Row, dropped []string) {
	out = make([]Row, 0, len(t.order))
	for _, k := range t.order {
		m, s, n := meanStd(t.vals[k])
		if n == 0 {
			continue
		}
		if math.IsInf(m, 0) || math.IsNaN(m) || math.IsInf(s, 0) || math.IsNaN(s) {
			dropped = append(dropped, fmt.Sprintf("%s %s %s S=%d %s", k.method, k.exp, k.corr, k.sev, k.metric))
			continue
		}
		out = append(out, Row{Method: k.method, Experiment: k.exp, Corruption: k.corr, Severity: k.sev,
			Metric: k.metric, Mean: m, Std: s, Seeds: n})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Experiment != b.Experiment {
			return a.Experiment < b.Experiment
		}
		if a.Severity != b.Severity {
			return a.Severity < b.Severity
		}
		return false
	})
	return out, dropped
}

// Lookup finds a row (ok false when absent).
func (r *Results) Lookup(method, exp, corr string, sev int, metric string) (Row, bool) {
	for _, x := range r.Runs {
		if x.Method == method && x.Experiment == exp && x.Corruption == corr && x.Severity == sev && x.Metric == metric {
			return x, true
		}
	}
	return Row{}, false
}

// WriteJSON writes results.json: the meta block indented, then one run per
// line (compact, and line diffs stay readable).
func (r *Results) WriteJSON(path string) error {
	var b bytes.Buffer
	b.WriteString("{\"runs\": [\n")
	for i, x := range r.Runs {
		x.Mean, x.Std = round6(x.Mean), round6(x.Std)
		line, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("results row %d: %w", i, err)
		}
		b.Write(line)
		if i < len(r.Runs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	meta, err := json.MarshalIndent(r.Meta, "", " ")
	if err != nil {
		return err
	}
	b.WriteString("],\n\"meta\": ")
	b.Write(meta)
	b.WriteString("}\n")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// round6 keeps 6 significant digits (the seeds' spread is far larger).
func round6(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	if err != nil {
		return v
	}
	return r
}

// ReadResults parses a results.json and checks its schema: known metric
// names, finite values, seeds >= 1.
func ReadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("results %q: %w", path, err)
	}
	if len(r.Runs) == 0 {
		return nil, fmt.Errorf("results %q: no runs", path)
	}
	for i, x := range r.Runs {
		if !contains(MetricNames, x.Metric) {
			return nil, fmt.Errorf("results %q: run %d: unknown metric %q", path, i, x.Metric)
		}
		if x.Method == "" || x.Experiment == "" || x.Corruption == "" || x.Severity < 0 || x.Severity > 5 || x.Seeds < 1 {
			return nil, fmt.Errorf("results %q: run %d: incomplete row %+v", path, i, x)
		}
		if math.IsNaN(x.Mean) || math.IsInf(x.Mean, 0) || math.IsNaN(x.Std) || math.IsInf(x.Std, 0) || x.Std < 0 {
			return nil, fmt.Errorf("results %q: run %d (%s %s %s s%d %s): mean %v std %v not finite", path, i,
				x.Method, x.Experiment, x.Corruption, x.Severity, x.Metric, x.Mean, x.Std)
		}
	}
	return &r, nil
}
