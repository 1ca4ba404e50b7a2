// Package objstore lets the offline commands take `s3://bucket/prefix`
// wherever they take a local path: data sets are read through an io/fs.FS
// over an S3 prefix (each object streamed by one GET, listings paginated),
// and summaries, calibration files and reports are written as objects.
//
// The client is minio-go (Apache-2.0), which speaks to AWS S3 and to any
// S3-compatible server. Credentials come from the usual places, in the
// AWS SDK's order: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
// AWS_SESSION_TOKEN, then the shared credentials file
// (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials) under
// AWS_PROFILE (default "default"). AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL
// names a server other than AWS; AWS_REGION or AWS_DEFAULT_REGION the
// region. Credentials are never logged nor put in errors: logs name where
// they came from, not what they are.
package objstore
