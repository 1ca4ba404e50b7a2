package dataset

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// NYU reads an NYU-style indoor layout:
//
//	DIR/rgb/<name>.png        RGB
//	DIR/depth/<name>.png      16-bit depth, value = metres * DepthScale
//	DIR/semantic/<name>.png   optional 8-bit NYU-40 class ids
//	DIR/splits/<split>.txt    optional, one <name> per line
//
// DepthScale defaults to 1000 (millimetres, the NYU toolbox export); use
// 256 for maps stored like KITTI's. Intrinsics default to the NYU Kinect
// colour camera (fx 518.86, fy 519.47, cx 325.58, cy 253.74 at 640x480)
// scaled to the image size.
//
// FS reads the root when set (an S3 prefix); Dir then only names it.
type NYU struct {
	Dir        string
	FS         fs.FS
	DepthScale float64
	Intrinsics *Intrinsics
}

// Items lists the frames of a split file, or every rgb/*.png (sorted) when
// split is "".
func (n *NYU) Items(split string) ([]Item, error) {
	fsys := dirFS(n.FS, n.Dir)
	if split == "" {
		// fs.Glob lists rgb/ through ReadDir: one paginated listing on S3.
		paths, err := fs.Glob(fsys, "rgb/*.png")
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", display(n.Dir, "rgb"), err)
		}
		sort.Strings(paths)
		items := make([]Item, len(paths))
		for i, p := range paths {
			items[i] = Item{Drive: "nyu", Frame: i, Side: 'l', RGBPath: strings.TrimSuffix(path.Base(p), ".png")}
		}
		return items, nil
	}
	name := fsJoin(SplitsDir, split+".txt")
	splitPath := display(n.Dir, name)
	data, err := readFile(fsys, n.Dir, name)
	if err != nil {
		return nil, err
	}
	var items []Item
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		name := strings.TrimSpace(sc.Text())
		if name == "" || name[0] == '#' {
			continue
		}
		if strings.ContainsAny(name, "/\\ \t") || name == "." || name == ".." {
			return nil, fmt.Errorf("split list %q line %d: %q is not a plain file name", splitPath, line, name)
		}
		items = append(items, Item{Drive: "nyu", Frame: len(items), Side: 'l', RGBPath: strings.TrimSuffix(name, ".png")})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("split list %q: %w", splitPath, err)
	}
	return items, nil
}

// Load reads one frame named by it.RGBPath (the file name without .png).
func (n *NYU) Load(it Item) (*Sample, error) {
	scale := n.DepthScale
	if scale == 0 {
		scale = 1000
	}
	fsys := dirFS(n.FS, n.Dir)
	name := it.RGBPath
	rgbName := fsJoin("rgb", name+".png")
	rgbPath := display(n.Dir, rgbName)
	w, h, rgb, err := readRGB(fsys, n.Dir, rgbName)
	if err != nil {
		return nil, err
	}
	depthName := fsJoin("depth", name+".png")
	depthPath := display(n.Dir, depthName)
	dw, dh, depth, err := readDepth(fsys, n.Dir, depthName, scale)
	if err != nil {
		return nil, err
	}
	if dw != w || dh != h {
		return nil, fmt.Errorf("depth %q is %dx%d but image %q is %dx%d", depthPath, dw, dh, rgbPath, w, h)
	}
	s := &Sample{Drive: it.Drive, Frame: it.Frame, Name: name, Width: w, Height: h, RGB: rgb, Sparse: depth}
	semName := fsJoin("semantic", name+".png")
	semPath := display(n.Dir, semName)
	if exists(fsys, semName) {
		sw, sh, sem, err := readLabels(fsys, n.Dir, semName)
		if err != nil {
			return nil, err
		}
		if sw != w || sh != h {
			return nil, fmt.Errorf("labels %q are %dx%d but image %q is %dx%d", semPath, sw, sh, rgbPath, w, h)
		}
		s.Semantic = sem
	}
	if n.Intrinsics != nil {
		s.Intrinsics = *n.Intrinsics
	} else {
		sx, sy := float64(w)/640, float64(h)/480
		s.Intrinsics = Intrinsics{Fx: 518.8579 * sx, Fy: 519.4696 * sy, Cx: 325.5824 * sx, Cy: 253.7362 * sy}
	}
	return s, nil
}
