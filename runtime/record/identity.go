package record

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
)

// ModelIdentity returns the metadata that identifies the models and the
// calibration a recording was made with: for each name (e.g. "depth",
// "auxue", "calibration") "<name>_path" and "<name>_sha256" of the file.
// Record it under the "didoedge.models" metadata name (Options.Metadata).
func ModelIdentity(files map[string]string) (map[string]string, error) {
	out := map[string]string{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		path := files[n]
		if path == "" {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("model identity %s: %w", n, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("model identity %s: %s: %w", n, path, err)
		}
		out[n+"_path"] = path
		out[n+"_sha256"] = hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}
