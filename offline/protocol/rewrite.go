package protocol

import "path/filepath"

// RewriteReport renders report.md and the plots of an earlier run of the
// same config in out again, from out/results.json and the plot data cached
// in cache (default out/cache); it returns the number of result rows.
func RewriteReport(cfg *Config, out, cache string) (int, error) {
	if cache == "" {
		cache = filepath.Join(out, "cache")
	}
	res, err := ReadResults(filepath.Join(out, "results.json"))
	if err != nil {
		return 0, err
	}
	curves, err := LoadCurves(CurvesPath(cache, cfg))
	if err != nil {
		return 0, err
	}
	if err := WriteReport(out, cfg, res, curves); err != nil {
		return 0, err
	}
	return len(res.Runs), nil
}
