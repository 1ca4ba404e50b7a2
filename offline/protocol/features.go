package protocol

import (
	"fmt"

	"github.com/didoedge/didoedge/auxue"
	"github.com/didoedge/didoedge/offline/depthnet"
)

// The AuxUE of the protocol works on f x f blocks (auxue.factor) with the
// inputs and targets of the exported runtime AuxUE (offline/depthnet).

// auxFeatures writes the f x f block means of the normalized image (3,H,W)
// and of depth/maxDepth (H,W) into dst (4,H/f,W/f), and with row a fifth
// channel holding the row coordinate of the block grid (the block mean of
// the main model's coordinate channel, as the reference AuxUE's
// aux_features carry it).
func auxFeatures(img, depth []float32, height, width, f int, row bool, dst []float32) {
	auxue.AuxFeatures(img, depth, height, width, f, maxDepth, dst)
	if !row {
		return
	}
	hf, wf := height/f, width/f
	coord := dst[auxChannels*hf*wf : (auxChannels+1)*hf*wf]
	for v := 0; v < hf; v++ {
		c := depthnet.RowCoordinate(v, hf)
		for u := 0; u < wf; u++ {
			coord[v*wf+u] = c
		}
	}
}

// auxInputs is the AuxUE input layout named by the key auxue.inputs.
type auxInputs struct {
	row     bool // the row coordinate after the image and depth
	decoder bool // the main model's last decoder features at the end
}

// parseAuxInputs reads auxue.inputs: rgbd, rgbd+row, rgbd+decoder or
// rgbd+row+decoder.
func parseAuxInputs(s string) (auxInputs, error) {
	switch s {
	case "rgbd":
		return auxInputs{}, nil
	case "rgbd+row":
		return auxInputs{row: true}, nil
	case "rgbd+decoder":
		return auxInputs{decoder: true}, nil
	case "rgbd+row+decoder":
		return auxInputs{row: true, decoder: true}, nil
	}
	return auxInputs{}, fmt.Errorf("%q (want rgbd, rgbd+row, rgbd+decoder or rgbd+row+decoder)", s)
}

// content is the number of channels before the decoder features.
func (in auxInputs) content() int {
	if in.row {
		return auxChannels + 1
	}
	return auxChannels
}

// blockErrors turns |depth - gt| on ground-truth pixels (gt > 0) into
// targets on f x f blocks: a block is valid when any of its pixels has
// ground truth, and its error is the mean over those pixels.
func blockErrors(depth, gt []float32, height, width, f int, errs []float32, valid []bool) {
	auxue.BlockErrors(depth, gt, height, width, f, errs, valid)
}
