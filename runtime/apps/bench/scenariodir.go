package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/runtime/apps/demo"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// scenarioSpec is the engine spec of the demo configuration of modelsDir:
// the zones and calibration a scenario run used.
func scenarioSpec(modelsDir string) (alerts.EngineSpec, error) {
	tmp, err := os.MkdirTemp("", "didoedge-replay-")
	if err != nil {
		return alerts.EngineSpec{}, err
	}
	defer os.RemoveAll(tmp)
	cfg, err := demo.Config(demo.Options{ModelsDir: modelsDir, WorkDir: tmp, HTTP: runconfig.HTTPOff}, "rtsp://127.0.0.1:1/unused")
	if err != nil {
		return alerts.EngineSpec{}, err
	}
	return cfg.AlertsConfig.EngineSpec("alerts")
}

// ReanalyzeScenarioDir rebuilds the report of a scenario run in dir from
// its recordings (report.md, report.json, timeline.png) and prints it.
func ReanalyzeScenarioDir(dir, modelsDir string, w io.Writer) error {
	spec, err := scenarioSpec(modelsDir)
	if err != nil {
		return err
	}
	aleaWarn := 0.0
	if c := spec.Calibration.Levels.AleatoricFraction; c != nil {
		aleaWarn = c.Warn.Enter
	}
	r, err := Reanalyze(dir, 3*time.Second, aleaWarn)
	if err != nil {
		return err
	}
	fmt.Fprint(w, r.Markdown())
	return nil
}

// ReplayScenarioDir replays the zone metrics recorded in dir with the
// tuning grid of timings and writes tuning.md there.
func ReplayScenarioDir(dir, modelsDir string, w io.Writer) error {
	spec, err := scenarioSpec(modelsDir)
	if err != nil {
		return err
	}
	res, err := ReplayDir(dir, spec, TuningGrid(), 3*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "replayed %d timings over %s; wrote %s\n", len(res), dir, filepath.Join(dir, "tuning.md"))
	return nil
}
