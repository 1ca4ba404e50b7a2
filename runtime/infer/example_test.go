package infer_test

import (
	"fmt"

	"github.com/didoedge/didoedge/runtime/infer"
)

// A user's spec for a MiDaS-like model: read, checked, and written back
// by the YAML encoder (what train auxue does for the AuxUE's own spec).
func ExampleParseIOSpec() {
	spec, err := infer.ParseIOSpec([]byte(`
input: {name: input, layout: NCHW, height: 256, width: 256, pixel_range: 255}
depth: {name: predicted_depth, meaning: relative}
`), "midas.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec.Layout(), spec.ResizeMode(), spec.Relative())
	out, _ := spec.Marshal("written back")
	fmt.Print(string(out))
	// Output:
	// NCHW stretch true
	// # written back
	// input:
	//   name: input
	//   layout: NCHW
	//   height: 256
	//   width: 256
	//   pixel_range: 255
	// depth:
	//   name: predicted_depth
	//   meaning: relative
}

// A camera frame of 640x192 letterboxed into a 256x256 input: the content
// rectangle, and where a frame pixel lands.
func ExampleFit() {
	g := infer.Fit(640, 192, 256, 256, infer.ResizeLetterbox)
	fmt.Printf("content %dx%d at (%d,%d)\n", g.CW, g.CH, g.X0, g.Y0)
	p := g.InputPixel(320, 96)
	fmt.Printf("frame (320,96) -> input row %d, column %d\n", p/256, p%256)
	// Output:
	// content 256x77 at (0,89)
	// frame (320,96) -> input row 127, column 128
}
