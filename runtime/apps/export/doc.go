// Package export writes the frames of a recording (MCAP, runtime/record)
// in the KITTI layout of package dataset, so that `didoedge calibrate` and
// `didoedge train auxue` read recorded drives as data sets. It is an
// application over recordings, like replay: the recorder itself writes no
// data-set layout.
package export
