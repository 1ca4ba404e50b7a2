package calibrate

import "github.com/didoedge/didoedge/internal/shard"

// IndexPlaceholder in a summary path is replaced by the shard index
// (internal/shard), so that every pod of an Indexed Job can be given the
// same --out.
const IndexPlaceholder = shard.IndexPlaceholder

// SummaryPath expands IndexPlaceholder in path.
func SummaryPath(path string, index int) string { return shard.Path(path, index) }
