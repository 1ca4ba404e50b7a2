package protocol

import (
	"strings"
	"testing"
)

// The supplementary D verdicts follow the numbers: a monotone trend in the
// paper's direction agrees, any step against it differs, and the categorical
// comparison agrees only when DIDO wins on every metric.
func TestAblationVerdicts(t *testing.T) {
	c := &Config{AuxUE: AuxUE{K: 32, Lambda: 0.01}, Ablations: Ablation{K: []int{8, 64}, Lambda: []float64{0.001, 0.1}}}
	rows := map[string][4]float64{ // sky auc, sky aupr, sky_all, dataset-change auc
		"dido_sep":          {0.80, 0.90, 0.20, 0.90},
		"dido_k8":           {0.90, 0.95, 0.30, 0.85}, // K: AUC falls with K (agrees), Sky-All falls (agrees)
		"dido_k64":          {0.70, 0.85, 0.10, 0.95}, // dataset change rises with K (agrees)
		"dido_lambda0.001":  {0.70, 0.80, 0.50, 0.80}, // lambda: AUC rises (differs)
		"dido_lambda0.1":    {0.85, 0.92, 0.25, 0.70}, // Sky-All 0.5, 0.2, 0.25: not monotone (differs); best dc at 0.01 (agrees)
		"categorical":       {0.60, 0.70, 0.15, 0.50}, // better Sky-All than DIDO: differs
		"dido_lambda0.0001": {},                       // not in the config: ignored
	}
	r := &Results{}
	for m, v := range rows {
		for i, k := range []struct{ exp, metric string }{{ExpSky, "auc"}, {ExpSky, "aupr"}, {ExpSky, "sky_all"}, {ExpDatasetChange, "auc"}} {
			r.Runs = append(r.Runs, Row{Method: m, Experiment: k.exp, Corruption: CorrClean, Metric: k.metric, Mean: v[i], Seeds: 3})
		}
	}
	got := strings.Join((&reportWriter{r: r}).ablationVerdicts(c), "\n")
	for _, want := range []string{
		"Dirichlet against categorical modelling (same K): the paper's DIDO is better on every sky metric and on the dataset change. Ours (DIDO vs categorical, clean): sky AUC 0.800 vs 0.600, sky AUPR 0.900 vs 0.700, Sky-All 0.200 vs 0.150, dataset-change AUC 0.900 vs 0.500: **differs**.",
		"larger K lowers the sky AUC. Ours: K=8 0.900, K=32 0.800, K=64 0.700: **agrees**.",
		"larger K improves (lowers) Sky-All. Ours: K=8 0.300, K=32 0.200, K=64 0.100: **agrees**.",
		"larger K raises the dataset-change AUC. Ours: K=8 0.850, K=32 0.900, K=64 0.950: **agrees**.",
		"larger lambda lowers the sky AUC. Ours: lambda=0.001 0.700, lambda=0.01 0.800, lambda=0.1 0.850: **differs**.",
		"larger lambda improves (lowers) Sky-All. Ours: lambda=0.001 0.500, lambda=0.01 0.200, lambda=0.1 0.250: **differs**.",
		"lambda = 0.01 gives the best dataset-change AUC. Ours: best lambda=0.01 (0.900): **agrees**.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdicts lack %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "0.0001") {
		t.Errorf("a method outside the config's ablations was used:\n%s", got)
	}
}
