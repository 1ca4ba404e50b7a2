// Package auxue implements the generalized Auxiliary Uncertainty Estimator of
// the DIDO paper ("Discretization-Induced Dirichlet Posterior for Robust
// Uncertainty Quantification on Regression", AAAI-24): the aleatoric head
// sigma_Theta1 with its NLL losses (Laplace by default; Gaussian, Generalized
// Gaussian and NIG for comparison), the epistemic head sigma_Theta2 trained
// with DIDO on discretized prediction errors (and a categorical baseline),
// the equal-frequency discretization, the read-outs, a training loop, the
// AuxUE's input features and targets on depth maps, and the layout outliers
// of the depth recipe. It imports nothing from runtime/, camera/ or calib/;
// the training applications live in package offline.
//
// Conventions shared by every loss:
//   - Losses take the heads' raw outputs (before the positivity activation)
//     and return d(mean loss)/d(raw output). The activation (exp or softplus)
//     is part of the loss and of the read-outs, not of the layer stack, so that
//     log-scale quantities stay exact and the gradient never overflows.
//   - Maps are flat []float32 laid out as (N, P, HW): N samples, P parameters or
//     classes per element, HW elements per sample. NCHW maps have HW = H*W and
//     P = C; vectors (N, P) have HW = 1. Per-element targets are (N, HW).
//   - The mean runs over valid elements only; with no valid element the loss is
//     0 and the gradient is zero (never NaN).
package auxue
