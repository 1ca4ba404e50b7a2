// Package gradcheck verifies analytic gradients against central finite
// differences accumulated in float64.
//
// Typical use in a test: compute the analytic gradient of a scalar loss with
// respect to a float32 slice (an input or a parameter's backing array), then
//
//	num := gradcheck.NumericGrad(loss, x, 1e-2)
//	if err := gradcheck.Check(analytic, num, gradcheck.Tolerance{Rel: 1e-2, Abs: 1e-3}); err != nil {
//		t.Fatal(err)
//	}
package gradcheck
