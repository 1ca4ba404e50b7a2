package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/calib/metrics"
	"github.com/didoedge/didoedge/pkg/nn"
)

// trainData is the cached frames an AuxUE trains on (train) and is
// validated on (val, nil: none), their records' layout and the AuxUE's grid.
type trainData struct {
	train, val *cachedFrames
	layout     recordLayout
	grid       [2]int
}

// trainLoop runs the epochs of o, validating and checkpointing after each,
// discretizing the errors into k bins, and reports into st (its contract
// and depth model's sha256 set). The shuffles and the outliers come from
// two PCGs seeded once by seed; a run resumed from a checkpoint replays
// their draws for the epochs done (without training), so it continues
// exactly as an uninterrupted one.
func trainLoop(ctx context.Context, o AuxOptim, seed int64, k int, model *auxue.Model, data trainData, st *AuxStats,
	progress io.Writer, log *slog.Logger) error {
	tc, vc, layout, grid := data.train, data.val, data.layout, data.grid
	named := model.Params()
	params := make([]*nn.Param, len(named))
	for i, p := range named {
		q := *p.Param
		q.Name = p.Name
		params[i] = &q
	}
	opt := nn.NewAdam(params, nn.AdamConfig{})
	B, C := o.Batch, layout.C
	gh, gw := grid[0], grid[1]
	g := gh * gw
	perEpoch := tc.n / B
	if perEpoch == 0 {
		return fmt.Errorf("train auxue: %d cached frames for a batch of %d", tc.n, B)
	}
	st.Steps = perEpoch * o.Epochs
	start := 0
	if o.Resume && o.Checkpoint != "" {
		if _, err := os.Stat(o.Checkpoint); err == nil {
			meta, err := nn.LoadCheckpointFile(o.Checkpoint, append(append([]*nn.Param{}, params...), opt.StateParams()...))
			if err != nil {
				return fmt.Errorf("train auxue: resume: %w", err)
			}
			if start, err = strconv.Atoi(meta["epoch"]); err != nil || start < 0 || start > o.Epochs {
				return fmt.Errorf("train auxue: resume: checkpoint %q: epoch %q, want 0 to %d", o.Checkpoint, meta["epoch"], o.Epochs)
			}
			if meta["steps_per_epoch"] != strconv.Itoa(perEpoch) || meta["seed"] != strconv.FormatInt(seed, 10) || meta["epochs"] != strconv.Itoa(o.Epochs) {
				return fmt.Errorf("train auxue: resume: checkpoint %q was written by a run of %s epochs of %s steps with seed %s, this run has %d epochs of %d steps and seed %d (the learning-rate schedule and the data order depend on them)",
					o.Checkpoint, meta["epochs"], meta["steps_per_epoch"], meta["seed"], o.Epochs, perEpoch, seed)
			}
			opt.SetSteps(start * perEpoch)
			st.ResumedFrom = start
			log.Info("train auxue: resumed", "checkpoint", o.Checkpoint, "epochs_done", start)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("train auxue: resume: %w", err)
		}
	}
	x := nn.NewDense(B, C, gh, gw)
	xs := nn.Data(x)
	// A layout outlier moves every channel but the row coordinate (the
	// depth model's features move with the image); the model's channels
	// are normalized after they are read from the cache.
	mf, base, keep := st.Contract.Model, st.Contract.BaseChannels(), st.Contract.RowChannel()
	errs, valid, bins := make([]float32, B*g), make([]bool, B*g), make([]int32, B*g)
	disc, err := auxue.NewDiscretizer(k)
	if err != nil {
		return err
	}
	rec := layout.newRecord()
	scratch := make([]float32, g)
	order := make([]int, tc.n)
	st.Epochs = make([]EpochReport, 0, o.Epochs-start) // the summary lists the epochs run: [] when none
	bar := newProgress(progress, "training", "steps", st.Steps-start*perEpoch)
	ph := &st.Phases
	trainStart := time.Now()
	trainTime := time.Duration(0)
	first := true
	rng := rand.New(rand.NewPCG(uint64(seed), 0x617578))
	orng := rand.New(rand.NewPCG(uint64(seed), 0x6f75746c))
	for i := range order {
		order[i] = i
	}
	for epoch := 0; epoch < start; epoch++ { // replay the draws of the epochs done
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for k := 0; k < perEpoch*B; k++ {
			auxue.MaybeOutlierKeep(orng, o.Outliers, o.OutlierKinds, xs[:C*g], C, gh, gw, keep, valid[:g], bins[:g], scratch)
		}
	}
	for epoch := start; epoch < o.Epochs; epoch++ {
		es := time.Now()
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var sumA, sumE float64
		for k := 0; k < perEpoch; k++ {
			step := epoch*perEpoch + k
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("train auxue: stopped at step %d: %w", step, err)
			}
			t0 := time.Now()
			for b := 0; b < B; b++ {
				if err := tc.read(order[k*B+b], rec); err != nil {
					return err
				}
				copy(xs[b*C*g:(b+1)*C*g], rec.feats)
				if mf != nil {
					mf.Normalize(xs[b*C*g+base*g:(b+1)*C*g], g)
				}
				e, v, bn := errs[b*g:(b+1)*g], valid[b*g:(b+1)*g], bins[b*g:(b+1)*g]
				for j, x := range rec.errs {
					v[j] = x >= 0
					e[j] = max(x, 0)
				}
				if err := disc.PerImage(e, v, 1, g, bn); err != nil {
					return err
				}
				auxue.MaybeOutlierKeep(orng, o.Outliers, o.OutlierKinds, xs[b*C*g:(b+1)*C*g], C, gh, gw, keep, v, bn, scratch)
			}
			t1 := time.Now()
			nn.ZeroGrad(params)
			l, err := model.Step(x, errs, valid, bins)
			if err != nil {
				return fmt.Errorf("train auxue step %d: %w", step, err)
			}
			if math.IsNaN(l.Total()) || math.IsInf(l.Total(), 0) {
				return fmt.Errorf("train auxue: loss %v at step %d", l.Total(), step)
			}
			t2 := time.Now()
			if err := opt.Step(nn.PolyDecay(o.LR, o.EndLR, step, st.Steps, 0.9)); err != nil {
				return err
			}
			t3 := time.Now()
			ph.Batch += Seconds(t1.Sub(t0))
			ph.Step += Seconds(t2.Sub(t1))
			ph.Optimizer += Seconds(t3.Sub(t2))
			sumA += l.Aleatoric
			sumE += l.Epistemic
			bar.set(step+1-start*perEpoch, fmt.Sprintf("epoch %d/%d laplace %.3f dido %.3f", epoch+1, o.Epochs, sumA/float64(k+1), sumE/float64(k+1)))
		}
		trainTime += time.Since(es)
		a, e := sumA/float64(perEpoch), sumE/float64(perEpoch)
		if first {
			st.FirstAlea, st.FirstEpis, st.FirstLoss = Float(a), Float(e), Float(a+e)
			first = false
		}
		st.LastAlea, st.LastEpis, st.LastLoss = Float(a), Float(e), Float(a+e)
		nan := Float(math.NaN())
		rep := EpochReport{Epoch: epoch + 1, Laplace: Float(a), DIDO: Float(e), AUSERMSE: nan, AURGRMSE: nan, SkyAUC: nan, NoGTAUC: nan,
			KS: [3]float64{math.NaN(), math.NaN(), math.NaN()}}
		if vc != nil {
			tv := time.Now()
			if err := validate(model, vc, layout, grid, st.Contract.InputContract, &rep); err != nil {
				return fmt.Errorf("train auxue: validation after epoch %d: %w", epoch+1, err)
			}
			ph.Validate += since(tv)
		}
		rep.Seconds = Float(time.Since(es).Seconds())
		st.Epochs = append(st.Epochs, rep)
		log.Info("train auxue", "epoch", epoch+1, "of", o.Epochs, "laplace", a, "dido", e,
			"val_ause_rmse", float64(rep.AUSERMSE), "val_aurg_rmse", float64(rep.AURGRMSE), "val_sky_auc", float64(rep.SkyAUC), "val_no_gt_auc", float64(rep.NoGTAUC),
			"elapsed", time.Since(trainStart).Round(time.Second))
		if o.Checkpoint != "" {
			tk := time.Now()
			meta := map[string]string{"epoch": strconv.Itoa(epoch + 1), "epochs": strconv.Itoa(o.Epochs), "steps_per_epoch": strconv.Itoa(perEpoch),
				"seed": strconv.FormatInt(seed, 10), "depth_sha256": st.DepthSHA256}
			if err := nn.SaveCheckpointFile(o.Checkpoint, append(append([]*nn.Param{}, params...), opt.StateParams()...), meta); err != nil {
				return err
			}
			ph.Checkpoint += since(tk)
		}
	}
	bar.finish("")
	if ran := (o.Epochs - start) * perEpoch * B; ran > 0 {
		st.Throughput.Train = Float(float64(ran) / (ph.Batch + ph.Step + ph.Optimizer).Float64())
	}
	return nil
}

// validate runs the Go AuxUE on the validation frames' cached features and
// computes, at the AuxUE's grid: AUSE and AURG of RMSE with the Laplace b
// as the uncertainty (sparsification per frame, 5% steps, averaged), the
// K/S AUC of sky blocks against blocks with ground truth (when the data
// has labels) and of blocks without ground truth against blocks with it.
func validate(model *auxue.Model, vc *cachedFrames, layout recordLayout, grid [2]int, contract auxue.InputContract, rep *EpochReport) error {
	gh, gw := grid[0], grid[1]
	g := gh * gw
	x := nn.NewDense(1, layout.C, gh, gw)
	rec := layout.newRecord()
	var pred auxue.Prediction
	sp := metrics.Sparsifier{}
	var rm metrics.SparsMean
	var sky, nogt metrics.BinaryScores
	ones, pe := make([]float32, g), make([]float32, g)
	allKS := make([]float32, 0, vc.n*g)
	for i := 0; i < vc.n; i++ {
		if err := vc.read(i, rec); err != nil {
			return err
		}
		copy(nn.Data(x), rec.feats)
		if mf := contract.Model; mf != nil {
			mf.Normalize(nn.Data(x)[contract.BaseChannels()*g:], g)
		}
		if err := model.Predict(x, 0.9, &pred); err != nil {
			return err
		}
		// RMSE of the block errors: ground truth 1 and prediction 1 + e
		// on labeled blocks, 0 (no ground truth) elsewhere.
		for k, e := range rec.errs {
			ones[k], pe[k] = 0, 0
			if e >= 0 {
				ones[k], pe[k] = 1, 1+e
			}
		}
		r, err := sp.Evaluate(pe, ones, pred.Scale, metrics.SparsRMSE)
		if err != nil {
			return err
		}
		rm.Add(r)
		allKS = append(allKS, pred.Epistemic[:g]...)
		for k, e := range rec.errs {
			ks := pred.Epistemic[k]
			if e >= 0 {
				if err := nogt.Add(ks, false); err != nil {
					return err
				}
				if rec.sky[k] != blockUnlabeled {
					if err := sky.Add(ks, false); err != nil {
						return err
					}
				}
				continue
			}
			if rec.sky[k] == blockSky {
				if err := sky.Add(ks, true); err != nil {
					return err
				}
			}
			if err := nogt.Add(ks, true); err != nil {
				return err
			}
		}
	}
	ause, aurg, _ := rm.Mean()
	rep.AUSERMSE, rep.AURGRMSE = Float(ause), Float(aurg)
	if len(allKS) > 0 {
		slices.Sort(allKS)
		for i, q := range []float64{0.5, 0.9, 0.99} {
			rep.KS[i] = float64(allKS[min(len(allKS)-1, int(q*float64(len(allKS))))])
		}
	}
	if p, n := sky.Counts(); p > 0 && n > 0 {
		auc, _ := sky.AUC()
		rep.SkyAUC = Float(auc)
	}
	if p, n := nogt.Counts(); p > 0 && n > 0 {
		auc, _ := nogt.AUC()
		rep.NoGTAUC = Float(auc)
	}
	return nil
}
