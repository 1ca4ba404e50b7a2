package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/didoedge/didoedge/internal/objstore"
)

// Version is the Versity Gateway release scripts/deps.sh builds.
const Version = "v1.8.0"

// EnvBinary overrides where the gateway binary is looked for.
const EnvBinary = "DIDOEDGE_VERSITYGW"

// Binary finds the gateway: $DIDOEDGE_VERSITYGW, else
// <module root>/third_party/versitygw/<Version>/versitygw.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "third_party", "versitygw", Version, "versitygw")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("versitygw %s not built (run scripts/deps.sh): %w", Version, err)
			}
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// Server is a running gateway.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT; AccessKey and SecretKey its root
	// user's credentials (random per server); Root the served directory.
	Endpoint, AccessKey, SecretKey, Root string

	bin    string
	addr   string
	cmd    *exec.Cmd
	waitCh chan error
	log    *os.File
}

// Start starts a gateway for t and stops it at t's end. Without the binary
// the test is skipped, except under CI (CI set), where it fails: CI runs
// scripts/deps.sh, so a missing binary there is a broken install.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("s3test: %v", err)
		}
		t.Skipf("s3test: %v", err)
	}
	key := make([]byte, 12)
	rand.Read(key)
	sec := make([]byte, 20)
	rand.Read(sec)
	s := &Server{AccessKey: "didoedge" + hex.EncodeToString(key), SecretKey: hex.EncodeToString(sec),
		Root: filepath.Join(t.TempDir(), "gw"), bin: bin}
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	l.Close()
	s.Endpoint = "http://" + s.addr
	if s.log, err = os.Create(filepath.Join(t.TempDir(), "versitygw.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		s.log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(s.log.Name())
			t.Logf("versitygw log:\n%s", b)
		}
	})
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Restart starts the gateway (again) on the same address and directory.
func (s *Server) Restart() error {
	if s.cmd != nil {
		return errors.New("s3test: already running")
	}
	cmd := exec.Command(s.bin, "--port", s.addr, "--quiet", "posix", s.Root)
	// The credentials go through the environment, not argv (ps shows argv).
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("s3test: start %s: %w", s.bin, err)
	}
	s.cmd = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			s.cmd = nil
			return fmt.Errorf("s3test: versitygw exited at start: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("s3test: versitygw did not listen on %s within 15 s", s.addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Hand the Wait back to Stop.
	s.waitCh = exited
	return nil
}

// Stop kills the gateway by its PID and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.waitCh
	s.cmd = nil
}

// PID is the running gateway's process id (0 when stopped).
func (s *Server) PID() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Env is the environment a client process needs to reach the server
// (ConfigFromEnv's variables), with no credentials file.
func (s *Server) Env() []string {
	return []string{
		objstore.EnvEndpoint + "=" + s.Endpoint,
		objstore.EnvAccessKey + "=" + s.AccessKey,
		objstore.EnvSecretKey + "=" + s.SecretKey,
		objstore.EnvRegion + "=us-east-1",
		objstore.EnvCredentials + "=/nonexistent",
	}
}

// Getenv reads Env, for objstore.ConfigFromEnv in the test's process.
func (s *Server) Getenv(k string) string {
	for _, kv := range s.Env() {
		if name, v, _ := strings.Cut(kv, "="); name == k {
			return v
		}
	}
	return ""
}

// Config is the client configuration for the server.
func (s *Server) Config() objstore.Config {
	return objstore.Config{Endpoint: s.Endpoint, Region: "us-east-1",
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), CredSource: "s3test"}
}

// MakeBucket creates a bucket through the S3 API.
func (s *Server) MakeBucket(t testing.TB, name string) {
	t.Helper()
	c, err := objstore.New(s.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Minio().MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("s3test: make bucket %s: %v", name, err)
	}
}

// Upload copies the local tree dir to s3://bucket/prefix/..., one PUT per
// file, and returns the number of objects.
func (s *Server) Upload(t testing.TB, dir, bucket, prefix string) int {
	t.Helper()
	c, err := objstore.New(s.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := 0
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		return c.Put(ctx, objstore.Location{Bucket: bucket, Key: strings.TrimPrefix(prefix+"/"+filepath.ToSlash(rel), "/")}, data, nil)
	})
	if err != nil {
		t.Fatalf("s3test: upload %s: %v", dir, err)
	}
	return n
}
