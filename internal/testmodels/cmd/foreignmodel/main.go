// Command foreignmodel builds one of the foreign depth models of
// internal/testmodels with Debian's python3-onnx around a reference depth
// graph, and the IO spec a user would write for it, for measurements run
// as commands (docs/alerts.md: the domain monitor's AUC on a foreign
// model):
//
//	go run ./internal/testmodels/cmd/foreignmodel --kind negdisp --reference models/depth.onnx --out DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/didoedge/didoedge/internal/testmodels"
)

func main() {
	kind := flag.String("kind", "negdisp", "midas, negdisp or nhwc (internal/testmodels.Foreign)")
	ref := flag.String("reference", "models/depth.onnx", "reference depth graph the foreign model wraps")
	out := flag.String("out", "", "output directory (required)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "foreignmodel: --out DIR is required")
		os.Exit(2)
	}
	model, spec, err := testmodels.BuildForeign(*kind, *ref, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "foreignmodel:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s and %s\n", model, spec)
}
