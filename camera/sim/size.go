package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a frame size "HxW" (the commands' --size, e.g. 192x640)
// as positive height and width.
func ParseSize(s string) (h, w int, err error) {
	hs, ws, ok := strings.Cut(strings.ToLower(s), "x")
	if ok {
		h, err = strconv.Atoi(hs)
	}
	if ok && err == nil {
		w, err = strconv.Atoi(ws)
	}
	if !ok || err != nil || h <= 0 || w <= 0 {
		return 0, 0, fmt.Errorf("%q is not HxW with positive integers", s)
	}
	return h, w, nil
}
