// Package offlinetest holds test helpers built on the offline tools, for
// the tests of the packages that cannot import them from non-test code
// (runtime/stream) and of the binary: a random-weight AuxUE with the input
// contract that `train auxue` exports for a depth model's spec.
//
// It lives beside offline rather than in internal/testmodels because
// offline's own tests import testmodels: testmodels importing offline would
// make a cycle.
package offlinetest
