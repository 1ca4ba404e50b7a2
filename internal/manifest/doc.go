// Package manifest reads models/MANIFEST, the record of every bundled
// model file: its sha256 and the exact command that reproduces it. The
// trainers write the blocks; the demo and the tests verify the files
// against them before anything loads.
package manifest
