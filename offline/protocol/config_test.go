package protocol

import (
	"os"
	"strings"
	"testing"
)

const minimalConfig = `
name: t
seeds: [1]
data: {width: 64, height: 32, train_seed: 1, drives: 1, frames_per_drive: 4, test_seed: 2, test_drives: 1, test_frames: 1, indoor_seed: 3, indoor_frames: 1}
main: {steps: 1, batch: 1, crop_width: 32, lr: 0.001, seed: 1}
auxue: {frames: 2, epochs: 1, batch: 1, lr: 0.001, end_lr: 0, encoder_width: 2, hidden: 2, k: 4, lambda: 0.01, inputs: rgbd, heads: [laplace], encoders: [separate]}
corruptions: [fog]
severities: [1]
`

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name, edit, want string // edit: "old=>new" applied to minimalConfig; want: error substring ("" = ok)
	}{
		{"minimal", "", ""},
		{"unknown key", "name: t=>name: t\nnmae: x", "nmae"},
		{"height", "height: 32=>height: 40", "data.height"},
		{"same seeds", "test_seed: 2=>test_seed: 1", "data.test_seed"},
		{"unknown head", "heads: [laplace]=>heads: [laplace, cauchy]", "auxue.heads"},
		{"laplace missing", "heads: [laplace]=>heads: [nig]", "laplace is required"},
		{"encoder", "encoders: [separate]=>encoders: [both]", "auxue.encoders"},
		{"inputs", "inputs: rgbd=>inputs: rgb", "auxue.inputs"},
		{"corruption", "corruptions: [fog]=>corruptions: [smog]", "corruptions"},
		{"severity", "severities: [1]=>severities: [6]", "corruptions/severities"},
		{"no seeds", "seeds: [1]=>seeds: []", "seeds"},
		{"ensemble of one", "name: t=>name: t\nbaselines: {ensemble_members: 1}", "ensemble_members"},
		{"crop", "crop_width: 32=>crop_width: 33", "key main"},
		{"ablation k", "name: t=>name: t\nablations: {k: [1]}", "ablations.k"},
		{"tabular rows", "name: t=>name: t\ntabular: {enabled: true, rows: 5, main_epochs: 1, aux_epochs: 1}", "key tabular"},
		{"bad yaml", "name: t=>name: [t", "eval config"},
		{"nan step", "name: t=>name: t\nsparsification_step: .nan", "sparsification_step"},
		{"nan end lr", "end_lr: 0=>end_lr: .nan", "auxue.lr"},
		{"negative unlabeled kl", "lambda: 0.01,=>lambda: 0.01, unlabeled_kl: -1,", "auxue.unlabeled_kl"},
		{"bands not dividing the rows", "lambda: 0.01,=>lambda: 0.01, global_context_bands: 5,", "auxue.global_context_bands"},
		{"factor 3", "lambda: 0.01,=>lambda: 0.01, factor: 3,", "auxue.factor"},
		{"factor 4 with decoder", "inputs: rgbd=>inputs: rgbd+decoder, factor: 4", "need 2"},
		{"bands not dividing the factor-4 rows", "lambda: 0.01,=>lambda: 0.01, factor: 4, global_context_bands: 16,", "AuxUE's 8 rows"},
		{"outlier fraction 1", "lambda: 0.01,=>lambda: 0.01, outliers: 1,", "auxue.outliers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := minimalConfig
			if tc.edit != "" {
				p := strings.SplitN(tc.edit, "=>", 2)
				if !strings.Contains(text, p[0]) {
					t.Fatalf("edit %q does not apply", p[0])
				}
				text = strings.Replace(text, p[0], p[1], 1)
			}
			c, err := ParseConfig([]byte(text), "test.yaml")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if c.Data.Width != 64 || c.AuxUE.K != 4 || c.AuxUE.Factor != 2 || c.Corruptions[0] != "fog" {
					t.Fatalf("decoded %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "test.yaml") {
				t.Fatalf("error %v, want one naming %q and the file", err, tc.want)
			}
		})
	}
}

func TestShippedConfigsParse(t *testing.T) {
	for _, p := range []string{"../../configs/eval-quick.yaml", "../../configs/eval-synth.yaml"} {
		c, err := LoadConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Seeds) != 3 {
			t.Errorf("%s: %d seeds, the protocol averages over 3", p, len(c.Seeds))
		}
	}
	c, _ := LoadConfig("../../configs/eval-synth.yaml")
	if c != nil && len(c.Corruptions) != 18 {
		t.Errorf("eval-synth: %d corruptions, want all 18", len(c.Corruptions))
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(minimalConfig))
	if b, err := os.ReadFile("../../configs/eval-quick.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("seeds: [1]\ndata: {height: -32}"))
	f.Add([]byte("{"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "fuzz.yaml")
		if err == nil && (len(c.Seeds) == 0 || c.Data.Height%32 != 0 || c.AuxUE.K < 1 || (c.AuxUE.Factor != 2 && c.AuxUE.Factor != 4)) {
			t.Fatalf("accepted an invalid config: %+v", c)
		}
	})
}
