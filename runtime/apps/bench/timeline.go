package bench

import (
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/plotpng"
)

// kindColors are the segment backgrounds of the timeline.
var kindColors = map[string]color.NRGBA{
	KindClear:    {230, 230, 230, 255},
	KindFog:      {170, 190, 215, 255},
	KindNoise:    {215, 200, 150, 255},
	KindNight:    {120, 120, 150, 255},
	KindIndoor:   {200, 170, 210, 255},
	KindObstacle: {175, 210, 170, 255},
	KindNewCam:   {150, 205, 215, 255},
}

// levelColors are the episode bars, by the highest level they reached.
var levelColors = map[alerts.Level]color.NRGBA{alerts.LevelWarn: {245, 150, 20, 255}, alerts.LevelCritical: {205, 30, 30, 255}}

// box is a filled rectangle in data coordinates.
type box struct {
	x0, x1, y0, y1 float64
	c              color.Color
}

// boxes plots rectangles (gonum/plot has no such plotter).
type boxes []box

func (bs boxes) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, b := range bs {
		pts := []vg.Point{{X: trX(b.x0), Y: trY(b.y0)}, {X: trX(b.x1), Y: trY(b.y0)}, {X: trX(b.x1), Y: trY(b.y1)}, {X: trX(b.x0), Y: trY(b.y1)}}
		c.FillPolygon(b.c, c.ClipPolygonXY(pts))
	}
}

func (bs boxes) DataRange() (xmin, xmax, ymin, ymax float64) {
	if len(bs) == 0 {
		return 0, 1, 0, 1
	}
	xmin, xmax, ymin, ymax = bs[0].x0, bs[0].x1, bs[0].y0, bs[0].y1
	for _, b := range bs {
		xmin, xmax, ymin, ymax = min(xmin, b.x0), max(xmax, b.x1), min(ymin, b.y0), max(ymax, b.y1)
	}
	return xmin, xmax, ymin, ymax
}

// swatch is a legend entry of one colour.
type swatch struct{ c color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(s.c, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}

// Timeline draws the drive: ground-truth segments as background bands
// and, one row per zone, the episodes as bars coloured by the highest
// level they reached (the part in the merge window included); a zone
// DomainZone among a.Zones is the row of the camera's domain_shift
// episodes.
func Timeline(path string, a *Analysis, eps []Episode) error {
	if len(a.Spans) == 0 {
		return fmt.Errorf("timeline: no segments")
	}
	t0 := a.Spans[0].Start
	end := a.Spans[len(a.Spans)-1].End
	row := map[string]int{}
	for i, z := range a.Zones {
		row[z] = i
	}
	n := float64(len(a.Zones))
	var bg, bars boxes
	for _, s := range a.Spans {
		base, _, _ := strings.Cut(s.Kind, ":") // noise:5 is drawn as noise
		bg = append(bg, box{s.Start.Sub(t0).Seconds(), s.End.Sub(t0).Seconds(), -0.5, n - 0.5, kindColors[base]})
	}
	for _, ep := range eps {
		i, ok := row[ep.Zone]
		if !ok {
			continue
		}
		e := ep.End
		if e.IsZero() || e.After(end) {
			e = end
		}
		bars = append(bars, box{ep.Start.Sub(t0).Seconds(), e.Sub(t0).Seconds(), float64(i) - 0.3, float64(i) + 0.3, levelColors[ep.MaxLevel]})
	}
	p := plot.New()
	p.Title.Text = "didoedge bench scenario: segments (background) and episodes per zone"
	p.X.Label.Text = "time since the drive started (s)"
	p.Add(bg, bars)
	p.NominalY(a.Zones...)
	p.X.Min, p.X.Max = 0, end.Sub(t0).Seconds()
	p.Y.Min, p.Y.Max = -0.5, n-0.5
	p.Legend.Top = true
	for _, k := range []string{KindClear, KindFog, KindNoise, KindNight, KindIndoor, KindObstacle, KindNewCam} {
		p.Legend.Add(k, swatch{kindColors[k]})
	}
	p.Legend.Add("episode (warn)", swatch{levelColors[alerts.LevelWarn]})
	p.Legend.Add("episode (critical)", swatch{levelColors[alerts.LevelCritical]})
	if err := plotpng.SaveLegendRight(p, path, 14*vg.Inch, 4*vg.Inch, 1.8*vg.Inch); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	return nil
}
