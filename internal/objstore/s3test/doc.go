// Package s3test starts a real S3-compatible server for tests: Versity
// Gateway (Apache-2.0) with its posix backend serving a temporary
// directory on 127.0.0.1, stopped by its PID. scripts/deps.sh (test mode)
// builds it into third_party/versitygw/<version>/ from the Go module proxy.
package s3test
