package offline

// setDefault sets *v to d when it holds the zero value (a config field
// left out).
func setDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}
