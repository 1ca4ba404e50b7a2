// Package domain tells whether a camera's frames look like the frames the
// models were trained on.
//
// A frame is summarized by a fixed vector of pooled statistics of what the
// AuxUE sees and says (Extractor: the picture's channel means per
// horizontal band, its contrast and fine-scale gradient energy, the
// depth's log mean per band and its spread, K/S and the Laplace scale per
// band, and the depth model's feature tensor pooled per channel group when
// the AuxUE reads it). A Record, written by train auxue into the AuxUE's
// spec from held-out frames of the training domain, stores the standardized
// mean, a Ledoit-Wolf shrinkage covariance (as its inverse) and the
// in-domain distances, so that
//
//	D(x) = sqrt( z' P z / d ),  z = (x - mean) / std
//
// is about 1 for a training-domain frame (E[z'P z] = d for Gaussian
// statistics: the chi-square mean) and grows when the frame is foreign.
// The other statistic a record can hold, and the one train auxue writes
// by default because it measured better (docs/alerts.md, "Choosing the
// statistic"), is the mean distance of z to its k nearest stored training
// frames over sqrt(2d) (KNN).
//
// Monitor smooths D over a window in seconds (the mean of the frames
// captured within it, bounded memory) and thresholds it; the threshold at
// a false-alarm rate comes from the record's cross-validated in-domain
// distances (Record.Threshold) or from calibration on in-domain frames.
//
// The package is a leaf: it imports nothing of the streaming core, the
// alerts or the applications, so that training, calibration and the
// runtime share one definition of the statistic and the distance.
package domain
