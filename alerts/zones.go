package alerts

import (
	"errors"
	"fmt"
	"math"
	"regexp"

	"github.com/didoedge/didoedge/internal/boundedfile"

	"github.com/didoedge/didoedge/internal/yamlstrict"
)

// ZoneSet is the zone part of a configuration: named polygons, an optional
// rows x cols grid, and ignore masks subtracted from every zone.
type ZoneSet struct {
	Zones  []ZoneSpec `yaml:"zones"`
	Grid   *GridSpec  `yaml:"grid"`
	Ignore []ZoneSpec `yaml:"ignore"`
}

// ZoneSpec is a named polygon in normalized image coordinates: x from 0
// (left) to 1 (right), y from 0 (top) to 1 (bottom).
type ZoneSpec struct {
	Name    string       `yaml:"name"`
	Polygon [][2]float64 `yaml:"polygon"`
}

// GridSpec splits the image into rows x cols zones named r<row>c<col>.
type GridSpec struct {
	Rows int `yaml:"rows"`
	Cols int `yaml:"cols"`
}

// Zone is a validated zone: a name and a polygon.
type Zone struct {
	Name    string
	Polygon [][2]float64
}

// MaxZones bounds the number of zones, so that per-frame work stays bounded.
const MaxZones = 256

// zoneNamePattern keeps zone names safe as MQTT topic levels and in ids.
var zoneNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_]{0,62}$`)

// LoadZones reads a zone file (keys zones, grid, ignore).
func LoadZones(path string) (ZoneSet, error) {
	data, err := boundedfile.Read("", path, boundedfile.Config)
	if err != nil {
		return ZoneSet{}, fmt.Errorf("load zones: %w", err)
	}
	return parseZones(path, data, yamlstrict.DecodeRedacted)
}

// ParseZones parses and validates a zone file; name labels errors.
func ParseZones(name string, data []byte) (ZoneSet, error) {
	return parseZones(name, data, yamlstrict.Decode)
}

func parseZones(name string, data []byte, decode func([]byte, any) error) (ZoneSet, error) {
	var zs ZoneSet
	if err := decode(data, &zs); err != nil {
		return ZoneSet{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := zs.Validate(""); err != nil {
		return ZoneSet{}, fmt.Errorf("%s: %w", name, err)
	}
	return zs, nil
}

// Validate checks the zone set; prefix is prepended to key paths.
func (zs ZoneSet) Validate(prefix string) error {
	_, _, err := zs.Resolve(prefix)
	return err
}

// Resolve validates the set and returns the zones (grid zones after the
// named ones) and the ignore masks.
func (zs ZoneSet) Resolve(prefix string) (zones, ignore []Zone, err error) {
	seen := map[string]string{}
	for i, z := range zs.Zones {
		p := fmt.Sprintf("%s[%d]", joinPath(prefix, "zones"), i)
		if err := validateZone(z, p); err != nil {
			return nil, nil, err
		}
		if prev, dup := seen[z.Name]; dup {
			return nil, nil, fmt.Errorf("%s.name: duplicate zone name %q (also %s)", p, z.Name, prev)
		}
		seen[z.Name] = p
		zones = append(zones, Zone{Name: z.Name, Polygon: z.Polygon})
	}
	if g := zs.Grid; g != nil {
		p := joinPath(prefix, "grid")
		if g.Rows < 1 || g.Rows > 16 {
			return nil, nil, fmt.Errorf("%s.rows: %d out of range [1,16]", p, g.Rows)
		}
		if g.Cols < 1 || g.Cols > 16 {
			return nil, nil, fmt.Errorf("%s.cols: %d out of range [1,16]", p, g.Cols)
		}
		for r := 0; r < g.Rows; r++ {
			for c := 0; c < g.Cols; c++ {
				name := fmt.Sprintf("r%dc%d", r, c)
				if prev, dup := seen[name]; dup {
					return nil, nil, fmt.Errorf("%s: grid zone %q collides with %s", p, name, prev)
				}
				seen[name] = p
				x0, x1 := float64(c)/float64(g.Cols), float64(c+1)/float64(g.Cols)
				y0, y1 := float64(r)/float64(g.Rows), float64(r+1)/float64(g.Rows)
				zones = append(zones, Zone{Name: name, Polygon: [][2]float64{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}}})
			}
		}
	}
	if len(zones) == 0 {
		return nil, nil, fmt.Errorf("%s: no zones: give zones or grid", joinPath(prefix, "zones"))
	}
	if len(zones) > MaxZones {
		return nil, nil, fmt.Errorf("%s: %d zones, at most %d", joinPath(prefix, "zones"), len(zones), MaxZones)
	}
	for i, z := range zs.Ignore {
		p := fmt.Sprintf("%s[%d]", joinPath(prefix, "ignore"), i)
		if err := validateZone(z, p); err != nil {
			return nil, nil, err
		}
		ignore = append(ignore, Zone{Name: z.Name, Polygon: z.Polygon})
	}
	return zones, ignore, nil
}

func validateZone(z ZoneSpec, p string) error {
	if !zoneNamePattern.MatchString(z.Name) {
		return fmt.Errorf("%s.name: %q must match %s", p, z.Name, zoneNamePattern)
	}
	if len(z.Polygon) < 3 {
		return fmt.Errorf("%s.polygon: needs at least 3 points, got %d", p, len(z.Polygon))
	}
	if len(z.Polygon) > 64 {
		return fmt.Errorf("%s.polygon: %d points, at most 64", p, len(z.Polygon))
	}
	for j, pt := range z.Polygon {
		for k, v := range pt {
			if math.IsNaN(v) || v < 0 || v > 1 {
				return fmt.Errorf("%s.polygon[%d][%d]: %v outside [0,1] (normalized image coordinates)", p, j, k, v)
			}
		}
	}
	if math.Abs(polygonArea(z.Polygon)) < 1e-9 {
		return fmt.Errorf("%s.polygon: zero area", p)
	}
	return nil
}

// polygonArea is the signed shoelace area.
func polygonArea(poly [][2]float64) float64 {
	var a float64
	for i := range poly {
		j := (i + 1) % len(poly)
		a += poly[i][0]*poly[j][1] - poly[j][0]*poly[i][1]
	}
	return a / 2
}

// contains reports whether (x, y) is inside poly by the even-odd rule.
func contains(poly [][2]float64, x, y float64) bool {
	in := false
	for i, j := 0, len(poly)-1; i < len(poly); j, i = i, i+1 {
		xi, yi := poly[i][0], poly[i][1]
		xj, yj := poly[j][0], poly[j][1]
		if (yi > y) != (yj > y) && x < (xj-xi)*(y-yi)/(yj-yi)+xi {
			in = !in
		}
	}
	return in
}

// Rasterize lists, per zone, the row-major indices of the pixels of a
// width x height map whose centres lie inside the zone and outside every
// ignore mask. It runs once per map size, not per frame.
func Rasterize(zones, ignore []Zone, width, height int) ([][]int32, error) {
	if width <= 0 || height <= 0 || int64(width)*int64(height) > math.MaxInt32 {
		return nil, fmt.Errorf("rasterize: bad map size %dx%d", width, height)
	}
	if len(zones) == 0 {
		return nil, errors.New("rasterize: no zones")
	}
	masked := make([]bool, width*height)
	for _, ig := range ignore {
		for y := 0; y < height; y++ {
			cy := (float64(y) + 0.5) / float64(height)
			for x := 0; x < width; x++ {
				if contains(ig.Polygon, (float64(x)+0.5)/float64(width), cy) {
					masked[y*width+x] = true
				}
			}
		}
	}
	out := make([][]int32, len(zones))
	for i, z := range zones {
		var idx []int32
		for y := 0; y < height; y++ {
			cy := (float64(y) + 0.5) / float64(height)
			for x := 0; x < width; x++ {
				p := y*width + x
				if !masked[p] && contains(z.Polygon, (float64(x)+0.5)/float64(width), cy) {
					idx = append(idx, int32(p))
				}
			}
		}
		out[i] = idx
	}
	return out, nil
}

// cameraPattern keeps camera ids safe as topic levels and inside event ids
// (which use '-' as separator).
var cameraPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)
