package control

import (
	"encoding/json"
	"testing"
)

// FuzzZonesBody: any zones body (the API's PUT and the MQTT set topic's
// payload) is decoded or refused without a panic; an accepted body is one
// JSON value, and every point of it was two numbers.
func FuzzZonesBody(f *testing.F) {
	for _, s := range []string{`{"zones": [{"name": "a", "polygon": [[0, 0], [1, 0], [1, 1]]}]}`, `{"zones": [{"name": "a", "polygon": [[0.5]]}]}`,
		`{"grid": {"rows": 1, "cols": 2}}`, `{} {}`, `{"zones": [{"polygon": [[], null]}]}`, `[`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var zs ZoneSetJSON
		if err := decodeStrict(data, &zs); err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted %q, which is not one JSON value", data)
		}
		var raw struct {
			Zones  []struct{ Polygon []json.RawMessage } `json:"zones"`
			Ignore []struct{ Polygon []json.RawMessage } `json:"ignore"`
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			return // a case-insensitive key match: encoding/json's own
		}
		for _, z := range append(raw.Zones, raw.Ignore...) {
			for _, p := range z.Polygon {
				var v []any
				if json.Unmarshal(p, &v) != nil || len(v) != 2 {
					t.Fatalf("accepted the point %s of %q", p, data)
				}
			}
		}
	})
}
