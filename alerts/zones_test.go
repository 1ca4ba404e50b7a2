package alerts

import (
	"strings"
	"testing"
)

func TestParseZonesErrorsNameKey(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"too few points", "zones:\n  - name: a\n    polygon: [[0,0],[1,0]]\n", "zones.yaml: zones[0].polygon: needs at least 3 points"},
		{"third zone", "zones:\n  - {name: a, polygon: [[0,0],[1,0],[1,1]]}\n  - {name: b, polygon: [[0,0],[1,0],[1,1]]}\n  - {name: c, polygon: [[0,0],[1,1]]}\n", "zones.yaml: zones[2].polygon: needs at least 3 points"},
		{"unknown key", "zones:\n  - name: a\n    polgon: [[0,0],[1,0],[1,1]]\n", "zones.yaml: zones[0].polgon: unknown key"},
		{"unknown top key", "zonez: []\n", "zones.yaml: zonez: unknown key"},
		{"out of range", "zones:\n  - {name: a, polygon: [[0,0],[1.5,0],[1,1]]}\n", "zones.yaml: zones[0].polygon[1][0]: 1.5 outside [0,1]"},
		{"bad name", "zones:\n  - {name: Bad/Name, polygon: [[0,0],[1,0],[1,1]]}\n", "zones.yaml: zones[0].name:"},
		{"duplicate", "zones:\n  - {name: a, polygon: [[0,0],[1,0],[1,1]]}\n  - {name: a, polygon: [[0,0],[1,0],[1,1]]}\n", "zones.yaml: zones[1].name: duplicate zone name"},
		{"zero area", "zones:\n  - {name: a, polygon: [[0,0],[0.5,0.5],[1,1]]}\n", "zones.yaml: zones[0].polygon: zero area"},
		{"grid rows", "grid: {rows: 0, cols: 2}\n", "zones.yaml: grid.rows: 0 out of range"},
		{"grid unknown", "grid: {rows: 2, columns: 2}\n", "zones.yaml: grid.columns: unknown key"},
		{"no zones", "ignore: []\n", "zones.yaml: zones: no zones"},
		{"ignore too few", "grid: {rows: 1, cols: 1}\nignore:\n  - {name: hood, polygon: []}\n", "zones.yaml: ignore[0].polygon: needs at least 3 points"},
		{"type error", "zones:\n  - name: a\n    polygon: [[0,0],[1,x],[1,1]]\n", "zones.yaml: zones[0].polygon[1][1]: cannot unmarshal !!str `x`"},
		{"grid collides", "zones:\n  - {name: r0c0, polygon: [[0,0],[1,0],[1,1]]}\ngrid: {rows: 1, cols: 1}\n", `zones.yaml: grid: grid zone "r0c0" collides`},
		{"empty", "", "zones.yaml: empty document"},
		{"not yaml", "zones: [", "zones.yaml: yaml:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseZones("zones.yaml", []byte(tc.yaml))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestParseZonesGridAndIgnore(t *testing.T) {
	zs, err := ParseZones("z", []byte("zones:\n  - {name: ego, polygon: [[0.25,0.5],[0.75,0.5],[0.75,1],[0.25,1]]}\ngrid: {rows: 2, cols: 3}\nignore:\n  - {name: hood, polygon: [[0,0.75],[1,0.75],[1,1],[0,1]]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	zones, ignore, err := zs.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	if len(zones) != 7 || zones[0].Name != "ego" || zones[6].Name != "r1c2" || len(ignore) != 1 {
		t.Fatalf("zones %v ignore %v", zones, ignore)
	}
	// 64x32 map: pixel centres are at (x+.5)/64, (y+.5)/32.
	r, err := Rasterize(zones, ignore, 64, 32)
	if err != nil {
		t.Fatal(err)
	}
	// ego: x in [0.25,0.75] -> 32 columns; y in [0.5,1] minus hood y>=0.75 -> rows 16..23 = 8 rows.
	if got := len(r[0]); got != 32*8 {
		t.Errorf("ego pixels %d, want %d", got, 32*8)
	}
	// Grid cells tile the image: 2x3 over 64x32 minus the hood (bottom 8 rows).
	total := 0
	for _, idx := range r[1:] {
		total += len(idx)
	}
	if total != 64*24 {
		t.Errorf("grid pixels %d, want %d", total, 64*24)
	}
	for _, p := range r[0] {
		y := int(p) / 64
		if y < 16 || y >= 24 {
			t.Fatalf("ego pixel in row %d", y)
		}
	}
}

func TestContainsTriangle(t *testing.T) {
	// The hypotenuse x+y = 0.995 passes half a pixel away from every centre.
	tri := [][2]float64{{0, 0}, {0.995, 0}, {0, 0.995}}
	r, err := Rasterize([]Zone{{Name: "t", Polygon: tri}}, nil, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	// Centres (x+.5, y+.5)/100 with x+y+1 < 99.5, i.e. x+y <= 98: sum over y of (99-y) = 4950.
	if len(r[0]) != 4950 {
		t.Fatalf("triangle pixels %d, want 4950", len(r[0]))
	}
}

func FuzzParseZones(f *testing.F) {
	f.Add([]byte("zones:\n  - {name: a, polygon: [[0,0],[1,0],[1,1]]}\n"))
	f.Add([]byte("grid: {rows: 2, cols: 2}\nignore:\n  - {name: hood, polygon: [[0,0.8],[1,0.8],[1,1]]}\n"))
	f.Add([]byte("zones: [{name: x, polygon: [[0,0],[1,x]]}]"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte("zones:\n  - name: a\n    polygon: !!binary AAAA\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		zs, err := ParseZones("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("error without file name: %v", err)
			}
			return
		}
		zones, ignore, err := zs.Resolve("")
		if err != nil {
			t.Fatalf("parsed but does not resolve: %v", err)
		}
		if _, err := Rasterize(zones, ignore, 8, 4); err != nil {
			t.Fatalf("valid zones do not rasterize: %v", err)
		}
	})
}
