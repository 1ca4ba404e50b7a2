package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/offline"
)

// TestTrainAuxUEDefaults: `train auxue` without recipe flags runs the
// default recipe (offline.DefaultAuxTrainConfig: 4-band global context,
// unlabeled-block KL 0.1, a quarter of flip/tiles layout outliers, lr
// 6e-3, epochs from the frames aiming at DefaultAuxSteps steps, the depth
// model's feature tensor chosen automatically); each recipe flag still
// overrides its default, including the booleans' =false forms; bad values
// fail before anything is loaded, naming the flag.
func TestTrainAuxUEDefaults(t *testing.T) {
	env, _, _ := modelTestEnv()
	run, summary, err := parseTrainAuxUE(env, []string{"--depth", "m.onnx", "--data", "kitti"})
	if err != nil {
		t.Fatal(err)
	}
	c := run.Train
	want := offline.DefaultAuxTrainConfig()
	if c.Epochs != 0 || c.Steps != offline.DefaultAuxSteps || c.LR != 6e-3 || !c.GlobalContext || c.GlobalContextBands != 4 ||
		c.UnlabeledKL != 0.1 || c.Outliers != 0.25 || !reflect.DeepEqual(c.OutlierKinds, []auxue.OutlierKind{auxue.OutlierFlip, auxue.OutlierTiles}) ||
		c.ModelFeatures != offline.FeaturesAuto || c.ModelFeatureChannels != auxue.DefaultModelFeatureChannels ||
		c.FeatureHeads != offline.FeatureHeadsDIDO || c.FeatureHeads != want.FeatureHeads || c.Teacher.Enabled() || c.IgnoreGroundTruth {
		t.Fatalf("defaults %+v", c)
	}
	run, _, err = parseTrainAuxUE(env, strings.Fields("--depth s.onnx --data rec.mcap --teacher t.onnx --teacher-auxue ta.onnx --teacher-max-uncertainty 0.45 --teacher-mask m.png --ignore-ground-truth"))
	if err != nil {
		t.Fatal(err)
	}
	// The flags given, and the teacher flags' defaults: --teacher-block-share 1, --teacher-batch 4.
	wantTeacher := offline.TeacherConfig{Model: "t.onnx", AuxUE: "ta.onnx", MaxUncertainty: 0.45, Mask: "m.png", BlockShare: 1, Batch: 4}
	if c := run.Train; c.Teacher != wantTeacher || !c.IgnoreGroundTruth || c.Data != "rec.mcap" {
		t.Fatalf("teacher flags parsed as %+v", c)
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{{"batch", c.Batch, want.Batch}, {"encoder-width", c.EncoderWidth, want.EncoderWidth}, {"hidden", c.Hidden, want.Hidden},
		{"k", c.K, want.K}, {"lambda", c.Lambda, want.Lambda}, {"factor", c.Factor, want.Factor}, {"max-depth", c.MaxDepth, want.MaxDepth},
		{"seed", c.Seed, want.Seed}, {"split", c.Split, want.Split}, {"val-split", c.ValSplit, want.ValSplit}} {
		if f.got != f.want {
			t.Errorf("--%s default %v, DefaultAuxTrainConfig %v", f.name, f.got, f.want)
		}
	}
	if c.DepthSpec != "m.yaml" || summary != "out/auxue-train.json" || run.Name != "auxue" {
		t.Fatalf("spec %q, summary %q, name %q", c.DepthSpec, summary, run.Name)
	}
	// The reference models' MANIFEST command spells its recipe out.
	run, _, err = parseTrainAuxUE(env, strings.Fields("--depth models/depth.onnx --seed 1 --frames 300 --epochs 15 --batch 2 --lr 2e-3 "+
		"--encoder-width 8 --hidden 8 --k 32 --lambda 0.01 --unlabeled-kl 0.1 --global-context --global-context-bands 4 --outliers 0.25 "+
		"--outlier-kinds flip,tiles --model-features off --drives 48 --frames-per-drive 200 --out models"))
	if err != nil {
		t.Fatal(err)
	}
	if c := run.Train; c.Epochs != 15 || c.LR != 2e-3 || c.ModelFeatures != offline.FeaturesOff || !c.GlobalContext || c.Frames != 300 {
		t.Fatalf("MANIFEST command parsed as %+v", c)
	}
	run, _, err = parseTrainAuxUE(env, strings.Fields("--global-context=false --outliers 0 --model-features relu_7 --model-feature-channels 8 --epochs 0 --steps 100"))
	if err != nil {
		t.Fatal(err)
	}
	if c := run.Train; c.GlobalContext || c.Outliers != 0 || c.ModelFeatures != "relu_7" || c.ModelFeatureChannels != 8 || c.Steps != 100 {
		t.Fatalf("overrides parsed as %+v", c)
	}
	for _, bad := range []struct{ args, want string }{
		{"--epochs -1", "--epochs -1"},
		{"--epochs 0 --steps 0", "--steps is 0"},
		{"--outliers 1", "--outliers 1"},
		{"--lr 0", "--lr 0"},
		{"--model-features=", "--model-features: empty"},
		{"--model-feature-channels 0", "--model-feature-channels 0"},
		{"--outlier-kinds fog", "outlier kind \"fog\""},
	} {
		if _, _, err := parseTrainAuxUE(env, strings.Fields(bad.args)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error with %q", bad.args, err, bad.want)
		}
	}
}
