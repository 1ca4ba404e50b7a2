// Package shard is what the sharded offline jobs (`calibrate shard`,
// `eval-quick shard`) share: which shard a process is (flags, or the
// environment of a Kubernetes Indexed Job's pod), the name of its summary
// file, writing it atomically so that a merge never reads half of one,
// and listing the summaries a merge reads.
package shard
