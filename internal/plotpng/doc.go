// Package plotpng writes gonum plots as PNG files: the evaluation report's
// curves, the scenario timeline and the toy's panels, with the legend in a
// column of its own right of the data area, so that no curve hides under
// it.
package plotpng
