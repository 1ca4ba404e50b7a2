package onnx_test

import (
	"fmt"

	"github.com/didoedge/didoedge/pkg/onnx"
)

// A model whose input joins a constant plane of batch 1 (a row
// coordinate, say) becomes a dynamic-batch model: the declarations get the
// symbolic dim N and the plane (the builder names it rows_1) follows the
// batch through an Expand.
func ExampleDynamicBatch() {
	b := onnx.NewBuilder("example")
	x := b.Input("image", 1, 3, 4, 8)
	rows := b.Const("rows", []int64{1, 1, 4, 8}, make([]float32, 32))
	y := b.Op("Concat", []string{x, rows}, onnx.IntAttr("axis", 1))
	b.Rename(y, "features")
	b.OutputShaped("features", 1, 4, 4, 8)
	m := b.Model()

	edit, err := onnx.DynamicBatch(m, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	d := m.Graph.Inputs[0].Type.Tensor.Shape.Dims[0]
	fmt.Println("declarations:", edit.Declarations, "broadcasts:", edit.Broadcasts, "input dim 0:", d.Param)
	// Output:
	// declarations: 2 broadcasts: [rows_1] input dim 0: N
}
