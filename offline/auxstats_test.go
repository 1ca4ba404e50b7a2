package offline

import (
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/auxue"
)

// TestAuxStatsSummaryKeys: AuxStats written as the summary has the keys of
// `train auxue`'s summary as it was written before AuxStats became the
// summary, in the same order (nested keys after their parent's, indented
// as WriteJSON writes them; the teacher's block_share added since), NaN
// figures as null and the phases in seconds.
func TestAuxStatsSummaryKeys(t *testing.T) {
	nan := Float(math.NaN())
	st := AuxStats{FirstLoss: nan, MeanTrainAbsRel: 0.25,
		Contract: TrainedContract{auxue.InputContract{Width: 640, Height: 192, Factor: 4, Row: true}},
		Features: &AuxFeatureSummary{}, Teacher: &TeacherReport{Mask: "m.png", MaxUncertainty: 1, ConfidenceDrop: 0.1},
		Epochs: []EpochReport{{AUSERMSE: nan, KS: [3]float64{1, 2, 3}}}, Domain: &AuxDomainSummary{}}
	st.Phases.Export = Seconds(1500 * time.Millisecond)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^( *)"([^"]+)":`).FindAllStringSubmatch(string(b), -1) {
		got = append(got, strings.Repeat(".", len(m[1])/2-1)+m[2])
	}
	want := strings.Fields(`model spec checkpoint seed frames val_frames steps resumed_from_epoch first_loss last_loss
		first_laplace last_laplace first_dido last_dido depth_train_absrel depth_model depth_sha256 provider relative
		contract .input .factor .grid .channels .row epochs_run epochs_auto
		model_features .tensor .shape .resolution .channels .projected .chosen .candidates .eligible
		teacher .model .sha256 .provider .relative .max_depth .mask .max_uncertainty .confidence_drop .block_share .ignored_ground_truth
		.train ..real_pixels ..teacher_pixels ..beyond_range_pixels ..masked_pixels ..low_confidence_pixels ..frames_with_ground_truth
		.val ..real_pixels ..teacher_pixels ..beyond_range_pixels ..masked_pixels ..low_confidence_pixels ..frames_with_ground_truth
		.cache_dir .frames_run .frames_reused .seconds
		epochs ..epoch ..laplace ..dido ..val_ause_rmse ..val_aurg_rmse ..val_sky_auc ..val_no_gt_auc ..seconds
		domain .frames .statistic .shrinkage .threshold_far_0.01 .source .seconds
		cache .dir .bytes .frames .reused .val_frames .val_reused .bytes_per_100_frames
		throughput_fps .cache .train
		phases_s .auxue_step .batch .cache_write .checkpoint .depth_model .export .load_frames .open_depth_model .optimizer .prepare .validate
		wall_s args`)
	if !slices.Equal(got, want) {
		t.Fatalf("summary keys\n%v\nwant\n%v\n%s", got, want, b)
	}
	for _, s := range []string{`"first_loss": null`, `"val_ause_rmse": null`, `"export": 1.5`, `"grid": "160x48"`, `"input": "640x192"`, `"depth_train_absrel": 0.25`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("summary lacks %s:\n%s", s, b)
		}
	}
	if strings.Contains(string(b), "KS") {
		t.Errorf("the epochs' K/S quantiles are the spec's, not the summary's:\n%s", b)
	}
}
