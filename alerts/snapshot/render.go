package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"math"
	"strings"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/internal/colormap"
)

// heatAlpha is the weight of the epistemic heat map over the frame.
const heatAlpha = 0.45

// levelColors draw zone outlines and the label (ok green, warn orange,
// critical red, as on the debug page).
var levelColors = [...]color.RGBA{{51, 204, 51, 255}, {255, 153, 0, 255}, {255, 34, 34, 255}}

// Render draws the snapshot of an event: the event's frame with the
// epistemic heat map (K/S from 0 to 2 tau_e, so that tau_e sits in the
// middle of the ramp) blended over it, the zone's outline in the colour of
// its level, and a label with zone, level and frame time. The JPEG carries
// the frame's capture time as EXIF DateTimeOriginal + SubSecTimeOriginal
// (UTC, OffsetTimeOriginal +00:00) and the event id as ImageDescription.
func Render(buf *bytes.Buffer, s *alerts.Snapshot, quality int) error {
	ev := s.Event
	im := s.Image
	if ev == nil {
		return errors.New("render snapshot: no event")
	}
	if im.Width <= 0 || im.Height <= 0 || len(im.RGB) != 3*im.Width*im.Height {
		return fmt.Errorf("render snapshot %s: image %dx%d with %d bytes", ev.ID, im.Width, im.Height, len(im.RGB))
	}
	mw, mh := s.Maps.Width, s.Maps.Height
	if mw <= 0 || mh <= 0 || len(s.Maps.Epistemic) != mw*mh {
		return fmt.Errorf("render snapshot %s: epistemic map %dx%d with %d values", ev.ID, mw, mh, len(s.Maps.Epistemic))
	}
	top := 1.0
	if s.TauE > 0 && s.TauE <= 0.5 {
		top = 2 * s.TauE
	}
	img := image.NewRGBA(image.Rect(0, 0, im.Width, im.Height))
	for y := range im.Height {
		my := min(mh-1, y*mh/im.Height)
		for x := range im.Width {
			mx := min(mw-1, x*mw/im.Width)
			v := float64(s.Maps.Epistemic[my*mw+mx]) / top
			hr, hg, hb := colormap.Heat(math.Max(0, math.Min(1, v)))
			i := 3 * (y*im.Width + x)
			o := img.PixOffset(x, y)
			img.Pix[o] = blend(im.RGB[i], hr)
			img.Pix[o+1] = blend(im.RGB[i+1], hg)
			img.Pix[o+2] = blend(im.RGB[i+2], hb)
			img.Pix[o+3] = 255
		}
	}
	level := ev.Level
	if level < alerts.LevelOK || int(level) >= len(levelColors) {
		level = alerts.LevelCritical
	}
	col := levelColors[level]
	outline(img, s.Zone.Polygon, col, max(3, im.Height/64))
	capture := time.UnixMilli(ev.TimeMS).UTC()
	label(img, fmt.Sprintf("%s %s %s", s.Zone.Name, strings.ToUpper(level.String()), capture.Format("15:04:05.000Z")), col)

	var enc bytes.Buffer
	if err := jpeg.Encode(&enc, img, &jpeg.Options{Quality: quality}); err != nil {
		return fmt.Errorf("render snapshot %s: %w", ev.ID, err)
	}
	b := enc.Bytes()
	buf.Reset()
	buf.Write(b[:2]) // SOI
	buf.Write(exifSegment(capture, "didoedge event "+ev.ID+" zone "+s.Zone.Name+" level "+level.String()))
	buf.Write(b[2:])
	return nil
}

func blend(a, b uint8) uint8 {
	return uint8(float64(a)*(1-heatAlpha) + float64(b)*heatAlpha + 0.5)
}

// outline draws the closed polygon (normalized coordinates) with lines of
// the given width.
func outline(img *image.RGBA, poly [][2]float64, c color.RGBA, width int) {
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	for i := range poly {
		a, b := poly[i], poly[(i+1)%len(poly)]
		x0, y0 := a[0]*float64(w), a[1]*float64(h)
		x1, y1 := b[0]*float64(w), b[1]*float64(h)
		n := int(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))) + 1
		for k := 0; k <= n; k++ {
			t := float64(k) / float64(n)
			cx, cy := int(x0+t*(x1-x0)), int(y0+t*(y1-y0))
			for dy := -width / 2; dy <= (width-1)/2; dy++ {
				for dx := -width / 2; dx <= (width-1)/2; dx++ {
					px, py := min(max(cx+dx, 0), w-1), min(max(cy+dy, 0), h-1)
					img.SetRGBA(px, py, c)
				}
			}
		}
	}
}

// label writes text on a band of the level's colour at the top left.
func label(img *image.RGBA, text string, bg color.RGBA) {
	face := basicfont.Face7x13
	d := &font.Drawer{Dst: img, Src: image.NewUniform(color.RGBA{0, 0, 0, 255}), Face: face}
	width := d.MeasureString(text).Ceil() + 8
	band := image.Rect(0, 0, min(width, img.Bounds().Dx()), min(17, img.Bounds().Dy()))
	draw.Draw(img, band, image.NewUniform(bg), image.Point{}, draw.Src)
	d.Dot = fixed.P(4, 13)
	d.DrawString(text)
}

// exifSegment is a JPEG APP1 segment with a minimal big-endian EXIF block:
// IFD0 with ImageDescription, DateTime and the Exif IFD pointer; the Exif
// IFD with DateTimeOriginal, SubSecTimeOriginal and OffsetTimeOriginal.
func exifSegment(t time.Time, description string) []byte {
	stamp := t.Format("2006:01:02 15:04:05")
	sub := fmt.Sprintf("%03d", t.Nanosecond()/1e6)
	type entry struct {
		tag   uint16
		value string // ASCII, NUL-terminated when written
		long  uint32 // for the Exif IFD pointer
		isPtr bool
	}
	ifd0 := []entry{{tag: 0x010E, value: description}, {tag: 0x0132, value: stamp}, {tag: 0x8769, isPtr: true}}
	exif := []entry{{tag: 0x9003, value: stamp}, {tag: 0x9011, value: "+00:00"}, {tag: 0x9291, value: sub}}
	ifdSize := func(n int) int { return 2 + 12*n + 4 }
	// Layout after the 8-byte TIFF header: IFD0, its data, Exif IFD, its data.
	dataSize := func(es []entry) int {
		n := 0
		for _, e := range es {
			if !e.isPtr && len(e.value)+1 > 4 {
				n += len(e.value) + 1
			}
		}
		return n
	}
	off0 := 8
	offExif := off0 + ifdSize(len(ifd0)) + dataSize(ifd0)
	ifd0[2].long = uint32(offExif)
	var tiff bytes.Buffer
	tiff.Write([]byte{'M', 'M', 0, 42, 0, 0, 0, 8})
	writeIFD := func(es []entry, start int) {
		be := binary.BigEndian
		data := start + ifdSize(len(es))
		var body, extra []byte
		body = be.AppendUint16(body, uint16(len(es)))
		for _, e := range es {
			body = be.AppendUint16(body, e.tag)
			if e.isPtr {
				body = be.AppendUint16(body, 4) // LONG
				body = be.AppendUint32(body, 1)
				body = be.AppendUint32(body, e.long)
				continue
			}
			v := append([]byte(e.value), 0)
			body = be.AppendUint16(body, 2) // ASCII
			body = be.AppendUint32(body, uint32(len(v)))
			if len(v) <= 4 {
				body = append(body, append(v, make([]byte, 4-len(v))...)...)
				continue
			}
			body = be.AppendUint32(body, uint32(data+len(extra)))
			extra = append(extra, v...)
		}
		body = be.AppendUint32(body, 0) // no next IFD
		tiff.Write(body)
		tiff.Write(extra)
	}
	writeIFD(ifd0, off0)
	writeIFD(exif, offExif)
	payload := append([]byte("Exif\x00\x00"), tiff.Bytes()...)
	seg := []byte{0xFF, 0xE1}
	seg = binary.BigEndian.AppendUint16(seg, uint16(len(payload)+2))
	return append(seg, payload...)
}
