// Package lograte keeps repeated log conditions from flooding the log: the
// first occurrence of a condition is logged at once, repeats within the
// following interval are counted, and one summary line per interval
// carries the count (attribute "repeated") and the latest attributes.
//
// A condition is a key chosen by the caller ("publish failed", "outbox
// full"); keys are few and fixed, so the limiter's memory is bounded by the
// code, not by the input.
package lograte
