// Package mcapcheck runs Foxglove's TypeScript MCAP reader (@mcap/core
// 2.2.2 with @mcap/support's decompressors and protobuf decoding, and
// @foxglove/schemas 2.1.0 for the official message definitions, pinned in
// testdata/node/package-lock.json and installed by scripts/deps.sh) under
// Node on files the tests write: an independent reader, so that a file
// Foxglove cannot open fails the test that wrote it.
package mcapcheck
