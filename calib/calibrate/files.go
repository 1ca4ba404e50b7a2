package calibrate

import (
	"strconv"
	"strings"
)

// IndexPlaceholder in a summary path is replaced by the shard index, so
// that every pod of an Indexed Job can be given the same --out.
const IndexPlaceholder = "{index}"

// SummaryPath expands IndexPlaceholder in path.
func SummaryPath(path string, index int) string {
	return strings.ReplaceAll(path, IndexPlaceholder, strconv.Itoa(index))
}
