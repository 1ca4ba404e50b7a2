// Package protocol reproduces the depth protocol of the DIDO paper (AAAI-24,
// section 4.3 and supplementary A.2/D) on the simulated worlds of camera/sim:
// aleatoric sparsification under corruptions (Tab. 2), sky as an unseen
// pattern (Tab. 4), outdoor against indoor frames (Tab. 3), the K and lambda
// ablations and a synthetic tabular OOD example, with every baseline trained
// and run by the project. Run trains (or loads from its cache) every model,
// evaluates them in-process with Go forward passes, and writes a long results
// table; WriteReport turns it into report.md and PNG plots.
package protocol
