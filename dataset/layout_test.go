package dataset

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseSplitList(t *testing.T) {
	in := `# comment
outdoor_drive_0000_sync 12

2011_09_26/2011_09_26_drive_0002_sync 69 l
2011_09_26/2011_09_26_drive_0002_sync 70 r
2011_09_26/2011_09_26_drive_0002_sync/image_02/data/0000000069.png 2011_09_26_drive_0002_sync/proj_depth/groundtruth/image_02/0000000069.png 721.5377
2011_09_26/2011_09_26_drive_0009_sync/image_03/data/0000000386.png None 721.5377
`
	items, err := ParseSplitList(strings.NewReader(in), "eigen.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []Item{
		{Drive: "outdoor_drive_0000_sync", Frame: 12, Side: 'l'},
		{Drive: "2011_09_26/2011_09_26_drive_0002_sync", Frame: 69, Side: 'l'},
		{Drive: "2011_09_26/2011_09_26_drive_0002_sync", Frame: 70, Side: 'r'},
		{Drive: "2011_09_26/2011_09_26_drive_0002_sync", Frame: 69, Side: 'l',
			RGBPath:   "2011_09_26/2011_09_26_drive_0002_sync/image_02/data/0000000069.png",
			DepthPath: "2011_09_26_drive_0002_sync/proj_depth/groundtruth/image_02/0000000069.png", Focal: 721.5377},
		{Drive: "2011_09_26/2011_09_26_drive_0009_sync", Frame: 386, Side: 'r',
			RGBPath: "2011_09_26/2011_09_26_drive_0009_sync/image_03/data/0000000386.png", Focal: 721.5377},
	}
	if len(items) != len(want) {
		t.Fatalf("got %d items, want %d", len(items), len(want))
	}
	for i := range want {
		if items[i] != want[i] {
			t.Errorf("item %d = %+v, want %+v", i, items[i], want[i])
		}
	}
}

func TestParseSplitListErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"one field", "drive\n", "line 1"},
		{"negative frame", "d -1\n", "frame"},
		{"non-numeric frame", "ok 1\nd x12\n", "line 2"},
		{"escaping drive", "../etc 3\n", "drive name"},
		{"absolute drive", "/etc 3\n", "drive name"},
		{"bad focal", "a/b/image_02/data/0000000001.png None -5\n", "focal"},
		{"bad rgb path", "a/b/c.png None 721\n", "rgb path"},
		{"dotdot depth", "a/b/image_02/data/0000000001.png ../x.png 721\n", "relative"},
		{"too many fields", "a 1 l extra\n", "fields"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSplitList(strings.NewReader(c.in), "list.txt")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "list.txt") {
				t.Fatalf("error %v, want one naming list.txt and containing %q", err, c.want)
			}
		})
	}
}

func TestSplitListRoundTrip(t *testing.T) {
	items := []Item{{Drive: "a_sync", Frame: 0, Side: 'l'}, {Drive: "b/c", Frame: 123456, Side: 'l'}}
	var buf bytes.Buffer
	if err := FormatSplitList(&buf, items); err != nil {
		t.Fatal(err)
	}
	got, err := ParseSplitList(&buf, "x")
	if err != nil || len(got) != 2 || got[0] != items[0] || got[1] != items[1] {
		t.Fatalf("round trip: %v %+v", err, got)
	}
}

func validMeta() Meta {
	return Meta{Format: MetaFormat, World: "outdoor", Width: 64, Height: 32, DepthScale: 256,
		Intrinsics: Intrinsics{Fx: 37, Fy: 62, Cx: 31.5, Cy: 14},
		Drives:     []Drive{{Name: "d0", Seed: 1, Split: "train", Count: 2, Stride: 1}}}
}

func TestParseMeta(t *testing.T) {
	good, _ := jsonIndent(validMeta())
	if _, err := ParseMeta(good, "meta.json"); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*Meta)) []byte {
		m := validMeta()
		f(&m)
		b, _ := jsonIndent(m)
		return b
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"unknown key", []byte(strings.Replace(string(good), `"world"`, `"wrld": 1, "world"`, 1)), "wrld"},
		{"truncated", good[:len(good)/2], "meta.json"},
		{"trailing", append(append([]byte{}, good...), []byte("{}")...), "trailing"},
		{"format", edit(func(m *Meta) { m.Format = "x" }), `"format"`},
		{"width", edit(func(m *Meta) { m.Width = 0 }), `"width"`},
		{"scale", edit(func(m *Meta) { m.DepthScale = -1 }), `"depth_scale"`},
		{"fx", edit(func(m *Meta) { m.Intrinsics.Fx = 0 }), `"intrinsics"`},
		{"drive escape", edit(func(m *Meta) { m.Drives[0].Name = "../x" }), "drives[0].name"},
		{"drive dup", edit(func(m *Meta) { m.Drives = append(m.Drives, m.Drives[0]) }), "drives[1].name"},
		{"stride", edit(func(m *Meta) { m.Drives[0].Stride = 0 }), "drives[0]"},
		{"split", edit(func(m *Meta) { m.Drives[0].Split = "dev" }), "drives[0].split"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseMeta(c.data, "meta.json")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "meta.json") {
				t.Fatalf("error %v, want one naming meta.json and %q", err, c.want)
			}
		})
	}
}

func TestAssignSplits(t *testing.T) {
	cases := []struct {
		n                int
		train, val, test int
	}{{1, 1, 0, 0}, {2, 2, 0, 0}, {3, 1, 1, 1}, {10, 8, 1, 1}, {20, 16, 2, 2}, {25, 19, 3, 3}}
	for _, c := range cases {
		got := map[string]int{}
		for _, s := range AssignSplits(c.n) {
			got[s]++
		}
		if got["train"] != c.train || got["val"] != c.val || got["test"] != c.test {
			t.Errorf("AssignSplits(%d) = %v, want %d/%d/%d", c.n, got, c.train, c.val, c.test)
		}
	}
}

func TestDriveSeedsDiffer(t *testing.T) {
	seen := map[int64]bool{}
	for d := 0; d < 1000; d++ {
		s := DriveSeed(7, d)
		if seen[s] || s < 0 {
			t.Fatalf("drive %d seed %d repeats or is negative", d, s)
		}
		seen[s] = true
	}
	if DriveSeed(7, 3) != DriveSeed(7, 3) || DriveSeed(7, 3) == DriveSeed(8, 3) {
		t.Fatal("DriveSeed is not a function of (seed, drive)")
	}
}

func FuzzParseSplitList(f *testing.F) {
	f.Add("a 1\nb/c 2 l\nx/y/image_02/data/0000000001.png None 721.5\n")
	f.Add("# c\n\n../a 1\n")
	f.Add("a/b/image_03/data/12.png a/b/g.png 1e309\n")
	f.Fuzz(func(t *testing.T, s string) {
		items, err := ParseSplitList(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		for _, it := range items {
			if checkDriveName(it.Drive) != nil || it.Frame < 0 {
				t.Fatalf("accepted bad item %+v", it)
			}
		}
	})
}

func FuzzParseMeta(f *testing.F) {
	good, _ := jsonIndent(validMeta())
	f.Add(good)
	f.Add([]byte(`{"format":"didoedge-sim/1"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMeta(data, "fuzz")
		if err != nil {
			return
		}
		if m.Width <= 0 || m.Height <= 0 || !(m.DepthScale > 0) {
			t.Fatalf("accepted invalid meta %+v", m)
		}
		for _, d := range m.Drives {
			if checkDriveName(d.Name) != nil || d.Stride <= 0 {
				t.Fatalf("accepted invalid drive %+v", d)
			}
		}
	})
}

func FuzzParseKITTICalib(f *testing.F) {
	f.Add("calib_time: 09-Jan-2012 13:57:47\nP_rect_02: 7.215377e+02 0.000000e+00 6.095593e+02 4.485728e+01 0.000000e+00 7.215377e+02 1.728540e+02 2.163791e-01 0.000000e+00 0.000000e+00 1.000000e+00 2.745884e-03\n")
	f.Add("nocolon\n")
	f.Fuzz(func(t *testing.T, s string) {
		vals, err := ParseKITTICalib(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		for k := range vals {
			if k == "" {
				t.Fatal("empty key accepted")
			}
		}
	})
}
