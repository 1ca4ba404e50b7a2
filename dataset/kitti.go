package dataset

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
)

// KITTI reads real KITTI depth data: raw frames from
// RawDir/<date>/<drive>/image_0X/data/%010d.png and the annotated ground
// truth from DepthDir/[train/|val/]<drive>/proj_depth/groundtruth/image_0X/
// %010d.png, selected by Eigen-style split lists (ParseSplitList). The
// intrinsics come from RawDir/<date>/calib_cam_to_cam.txt (P_rect_02 or
// P_rect_03), or from the focal column of BTS-style lists.
//
// RawFS and DepthFS read the two roots when set (an S3 prefix); RawDir and
// DepthDir then only name them in messages.
type KITTI struct {
	RawDir, DepthDir string
	RawFS, DepthFS   fs.FS

	mu    sync.Mutex
	calib map[string]Intrinsics
}

// Load reads one frame. Items whose ground truth is "None" load with a nil
// Sparse map.
func (k *KITTI) Load(it Item) (*Sample, error) {
	cam := "image_02"
	if it.Side == 'r' {
		cam = "image_03"
	}
	rgbName := it.RGBPath
	if rgbName == "" {
		rgbName = fsJoin(it.Drive, cam, "data", fmt.Sprintf("%010d.png", it.Frame))
	}
	rgbPath := display(k.RawDir, rgbName)
	w, h, rgb, err := readRGB(k.rawFS(), k.RawDir, rgbName)
	if err != nil {
		return nil, err
	}
	s := &Sample{Drive: it.Drive, Frame: it.Frame, Name: fmt.Sprintf("%s/%s/%010d", it.Drive, cam, it.Frame),
		Width: w, Height: h, RGB: rgb}
	if depthName, err := k.depthPath(it, cam); err != nil {
		return nil, err
	} else if depthName != "" {
		depthPath := display(k.DepthDir, depthName)
		dw, dh, d, err := readDepth(k.depthFS(), k.DepthDir, depthName, KITTIDepthScale)
		if err != nil {
			return nil, err
		}
		if dw != w || dh != h {
			return nil, fmt.Errorf("depth %q is %dx%d but image %q is %dx%d", depthPath, dw, dh, rgbPath, w, h)
		}
		s.Sparse = d
	}
	in, err := k.intrinsics(it, cam, w, h)
	if err != nil {
		return nil, err
	}
	s.Intrinsics = in
	return s, nil
}

func (k *KITTI) rawFS() fs.FS   { return dirFS(k.RawFS, k.RawDir) }
func (k *KITTI) depthFS() fs.FS { return dirFS(k.DepthFS, k.DepthDir) }

// depthPath is the name of it's ground truth in depthFS ("" for none).
func (k *KITTI) depthPath(it Item, cam string) (string, error) {
	if it.RGBPath != "" {
		return it.DepthPath, nil
	}
	base := path.Base(it.Drive)
	rel := fsJoin(base, "proj_depth", "groundtruth", cam, fmt.Sprintf("%010d.png", it.Frame))
	var tried []string
	for _, sub := range []string{"", "train", "val"} {
		p := fsJoin(sub, rel)
		if exists(k.depthFS(), p) {
			return p, nil
		}
		tried = append(tried, display(k.DepthDir, p))
	}
	return "", fmt.Errorf("no ground truth for %s frame %d (tried %s)", it.Drive, it.Frame, strings.Join(tried, ", "))
}

func (k *KITTI) intrinsics(it Item, cam string, w, h int) (Intrinsics, error) {
	date := ""
	if i := strings.Index(it.Drive, "/"); i > 0 {
		date = it.Drive[:i]
	}
	name := fsJoin(date, "calib_cam_to_cam.txt")
	path := display(k.RawDir, name)
	key := name + "#" + cam
	k.mu.Lock()
	in, ok := k.calib[key]
	k.mu.Unlock()
	if ok {
		return in, nil
	}
	data, err := readFile(k.rawFS(), k.RawDir, name)
	if err != nil {
		if it.Focal > 0 {
			return Intrinsics{Fx: it.Focal, Fy: it.Focal, Cx: float64(w-1) / 2, Cy: float64(h-1) / 2}, nil
		}
		return Intrinsics{}, fmt.Errorf("intrinsics of %s: %w", it.Drive, err)
	}
	vals, err := ParseKITTICalib(bytes.NewReader(data), path)
	if err != nil {
		return Intrinsics{}, err
	}
	pk := "P_rect_0" + cam[len(cam)-1:]
	p, ok := vals[pk]
	if !ok || len(p) != 12 {
		return Intrinsics{}, fmt.Errorf("calib %q: key %q missing or not 12 numbers", path, pk)
	}
	in = Intrinsics{Fx: p[0], Fy: p[5], Cx: p[2], Cy: p[6]}
	if !(in.Fx > 0) || !(in.Fy > 0) {
		return Intrinsics{}, fmt.Errorf("calib %q: key %q has a non-positive focal length", path, pk)
	}
	k.mu.Lock()
	if k.calib == nil {
		k.calib = map[string]Intrinsics{}
	}
	k.calib[key] = in
	k.mu.Unlock()
	return in, nil
}

// ParseKITTICalib reads a KITTI calibration file of "key: v1 v2 ..." lines.
// Keys whose values are not all numbers (calib_time) are skipped.
func ParseKITTICalib(r io.Reader, name string) (map[string][]float64, error) {
	out := map[string][]float64{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		key, rest, ok := strings.Cut(text, ":")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, fmt.Errorf("calib %q line %d: want \"key: values\"", name, line)
		}
		fields := strings.Fields(rest)
		vals := make([]float64, 0, len(fields))
		for _, f := range fields {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				vals = nil
				break
			}
			vals = append(vals, v)
		}
		if vals != nil {
			out[key] = vals
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("calib %q: %w", name, err)
	}
	return out, nil
}
