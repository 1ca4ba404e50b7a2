package boundedfile_test

import (
	"errors"
	"fmt"

	"github.com/didoedge/didoedge/internal/boundedfile"
)

func ExampleRead() {
	_, err := boundedfile.Read("alerts.calibration", "/dev/zero", boundedfile.Calibration)
	fmt.Println(err)
	fmt.Println(errors.Is(err, boundedfile.ErrNotRegular))
	// Output:
	// alerts.calibration: "/dev/zero": not a regular file (a character device)
	// true
}
