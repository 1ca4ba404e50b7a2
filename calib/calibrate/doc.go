// Package calibrate sets the alert thresholds from in-distribution
// validation frames: it runs the depth model and the AuxUE over a data set's
// val split and writes the alerts calibration file with tau_e per zone at
// the target false-alarm rate, tau_a, and the Laplace scale correction that
// makes the pessimistic-depth interval cover its nominal fraction.
package calibrate
