package objstore

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/didoedge/didoedge/internal/redact"
)

// Environment variables read by ConfigFromEnv (the AWS SDK's names).
const (
	EnvAccessKey   = "AWS_ACCESS_KEY_ID"
	EnvSecretKey   = "AWS_SECRET_ACCESS_KEY"
	EnvSession     = "AWS_SESSION_TOKEN"
	EnvEndpoint    = "AWS_ENDPOINT_URL"
	EnvEndpointS3  = "AWS_ENDPOINT_URL_S3"
	EnvRegion      = "AWS_REGION"
	EnvRegionOld   = "AWS_DEFAULT_REGION"
	EnvProfile     = "AWS_PROFILE"
	EnvCredentials = "AWS_SHARED_CREDENTIALS_FILE"
)

// defaultEndpoint is AWS S3's global endpoint.
const defaultEndpoint = "https://s3.amazonaws.com"

// DefaultPageSize is the number of keys asked per listing request (S3's
// own maximum).
const DefaultPageSize = 1000

// Config says how to reach object storage.
type Config struct {
	// Endpoint is the server's URL (scheme and host, no path).
	Endpoint string
	Region   string
	// Creds are the credentials; CredSource says where they came from, in
	// words fit for a log ("environment", "file ... profile ...").
	Creds      *credentials.Credentials
	CredSource string
	// PageSize is the keys asked per listing request (DefaultPageSize
	// when 0); tests make it small to prove that listings page.
	PageSize int
	// Transport carries the requests (http.DefaultTransport's settings
	// when nil); tests wrap it to count requests.
	Transport http.RoundTripper
}

// ConfigFromEnv reads the configuration from the environment getenv
// reads (os.Getenv in the binary), with the shared credentials file of
// home (os.UserHomeDir) when the environment has no keys.
func ConfigFromEnv(getenv func(string) string, home string) (Config, error) {
	c := Config{Endpoint: defaultEndpoint, Region: getenv(EnvRegion)}
	if c.Region == "" {
		c.Region = getenv(EnvRegionOld)
	}
	for _, k := range []string{EnvEndpointS3, EnvEndpoint} {
		if v := getenv(k); v != "" {
			c.Endpoint = v
			if _, _, err := parseEndpoint(v); err != nil {
				return Config{}, fmt.Errorf("environment %s: %w", k, err)
			}
			break
		}
	}
	id, secret := getenv(EnvAccessKey), getenv(EnvSecretKey)
	switch {
	case id != "" && secret != "":
		c.Creds = credentials.NewStaticV4(id, secret, getenv(EnvSession))
		c.CredSource = "environment " + EnvAccessKey
		return c, nil
	case id != "" || secret != "":
		return Config{}, fmt.Errorf("environment: %s and %s go together (one of them is empty)", EnvAccessKey, EnvSecretKey)
	}
	file := getenv(EnvCredentials)
	if file == "" && home != "" {
		file = filepath.Join(home, ".aws", "credentials")
	}
	profile := getenv(EnvProfile)
	if profile == "" {
		profile = "default"
	}
	if file != "" {
		if _, err := os.Stat(file); err == nil {
			c.Creds = credentials.New(&credentials.FileAWSCredentials{Filename: file, Profile: profile})
			// Retrieve now: a missing profile or half a key pair is an
			// error at the start that names the file and profile, not an
			// "access denied" at the first request.
			v, err := c.Creds.GetWithContext(nil)
			if err != nil {
				return Config{}, fmt.Errorf("credentials file %s, profile %q: %w", file, profile, err)
			}
			if v.AccessKeyID == "" || v.SecretAccessKey == "" {
				return Config{}, fmt.Errorf("credentials file %s: profile %q has no aws_access_key_id and aws_secret_access_key", file, profile)
			}
			c.CredSource = fmt.Sprintf("file %s profile %q", file, profile)
			return c, nil
		}
	}
	c.Creds = credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
	c.CredSource = "none (anonymous requests: set " + EnvAccessKey + " or a credentials file)"
	return c, nil
}

// parseEndpoint splits an endpoint URL into minio-go's host and TLS flag.
func parseEndpoint(raw string) (host string, secure bool, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, fmt.Errorf("endpoint %q: %w", redact.URL(raw), errors.Unwrap(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", false, fmt.Errorf("endpoint %q: want http:// or https://", redact.URL(raw))
	case u.User != nil:
		return "", false, fmt.Errorf("endpoint %q: credentials go in %s and %s, not in the URL", redact.URL(raw), EnvAccessKey, EnvSecretKey)
	case u.Host == "":
		return "", false, fmt.Errorf("endpoint %q: no host", redact.URL(raw))
	case strings.Trim(u.Path, "/") != "" || u.RawQuery != "":
		return "", false, fmt.Errorf("endpoint %q: no path or query allowed (the bucket goes in s3://bucket/prefix)", redact.URL(raw))
	}
	return u.Host, u.Scheme == "https", nil
}
