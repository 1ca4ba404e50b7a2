package calibrate

import (
	"errors"
	"fmt"

	"github.com/didoedge/didoedge/runtime/infer"
)

// ErrStranger marks calibration data that look out of distribution for
// the AuxUE (CheckStranger).
var ErrStranger = errors.New("calibration data look out of distribution for the AuxUE")

// CheckStranger compares the K/S of the calibration data (the merged
// histogram over their valid pixels) with the AuxUE's own validation
// statistics (recorded by train auxue in its spec, over every block of its
// validation frames): when the median calibration pixel is more uncertain
// than 90 % of the AuxUE's in-distribution validation pixels
// (median > validation p90), the data are strangers to the AuxUE, and a
// threshold set on them (tau_e at their high quantile) would silence the
// epistemic alarm on exactly what it should flag. Calibrating on them
// needs the AuxUE trained on this camera's data first. It returns nil when
// the spec records no validation (older AuxUEs) or the data look familiar,
// and the numbers otherwise, wrapping ErrStranger.
func CheckStranger(ks *Hist, v *infer.AuxUEValidation) error {
	if v == nil || ks.N() == 0 {
		return nil
	}
	p50 := ks.Quantile(0.5)
	if p50 <= v.KSP90 {
		return nil
	}
	return fmt.Errorf("%w: median K/S %.4g of the calibration pixels is above the AuxUE's own validation p90 %.4g "+
		"(validation on %d frames: p50 %.4g, p90 %.4g, p99 %.4g); a tau_e set on these frames would silence the epistemic alarm "+
		"on data like them: train auxue on this camera's data first (or pass --force to calibrate anyway)",
		ErrStranger, p50, v.KSP90, v.Frames, v.KSP50, v.KSP90, v.KSP99)
}
