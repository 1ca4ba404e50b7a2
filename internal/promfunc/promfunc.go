// Package promfunc builds Prometheus collectors whose value is read from a
// function at scrape time: a component exports counters and gauges of its
// own statistics without a lock on its hot path and without a copy of the
// closure boilerplate in each package.
package promfunc

import "github.com/prometheus/client_golang/prometheus"

// Number is what a statistic may be.
type Number interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Counter is a counter named name whose value is value() at each scrape
// (value must never decrease).
func Counter[N Number](name, help string, value func() N) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(value()) })
}

// Gauge is a gauge named name whose value is value() at each scrape.
func Gauge[N Number](name, help string, value func() N) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(value()) })
}

// Flag is a gauge that is 1 while on() holds and 0 otherwise.
func Flag(name, help string, on func() bool) prometheus.Collector {
	return Gauge(name, help, func() int {
		if on() {
			return 1
		}
		return 0
	})
}
