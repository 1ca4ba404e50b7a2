package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/objstore/s3test"
)

// requests counts a client's HTTP requests by kind.
type requests struct {
	mu     sync.Mutex
	counts map[string]int
}

func (r *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := req.Method
	if req.Method == http.MethodGet && req.URL.Query().Has("list-type") {
		kind = "LIST"
	}
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	r.counts[kind]++
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *requests) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.counts
	r.counts = nil
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestFSOnGateway: an S3 prefix on a real server passes the standard
// library's fs.FS conformance checker (Open, Stat, ReadDir, Glob and
// ReadFile agree with each other and with the uploaded tree), listings
// page, a read is one streamed GET, and missing names are fs.ErrNotExist.
func TestFSOnGateway(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "drives")
	dir := t.TempDir()
	files := map[string]string{
		"meta.json":                    `{"format":"x"}`,
		"a.png":                        "A",
		"a/b.png":                      "AB",
		"a0":                           "zero", // S3 byte order puts "a/" between "a.png" and "a0"
		"d/frames/0000000001.png":      strings.Repeat("x", 3000),
		"d/frames/0000000002.png":      "2",
		"d/frames/0000000003.png":      "3",
		"d/frames/0000000004.png":      "4",
		"d/frames/0000000005.png":      "5",
		"d/frames/sub/0000000006.png":  "6",
		"d/frames/sub2/0000000007.png": "7",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(data), 0o644)
	}
	if n := srv.Upload(t, dir, "drives", "fleet/v1"); n != len(files) {
		t.Fatalf("uploaded %d objects, want %d", n, len(files))
	}
	counter := &requests{}
	cfg := srv.Config()
	cfg.PageSize = 2
	cfg.Transport = counter
	c, err := objstore.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsys := c.FS(ctxT(t), objstore.Location{Bucket: "drives", Key: "fleet/v1"})
	var names []string
	for n := range files {
		names = append(names, n)
	}
	if err := fstest.TestFS(fsys, names...); err != nil {
		t.Fatal(err)
	}

	// A listing of 7 entries (5 objects, 2 common prefixes) in pages of 2
	// takes ceil(7/2) = 4 list requests.
	counter.take()
	ents, err := fs.ReadDir(fsys, "d/frames")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 7 || !ents[5].IsDir() || ents[5].Name() != "sub" {
		t.Fatalf("entries %v", ents)
	}
	if got := counter.take(); got["LIST"] != 4 {
		t.Fatalf("requests %v: want 4 LIST (7 entries, pages of 2)", got)
	}

	// Open of a file is one GET; its body is read as it streams.
	f, err := fsys.Open("d/frames/0000000001.png")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	total := 0
	for {
		n, err := f.Read(buf)
		total += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if got := counter.take(); total != 3000 || got["GET"] != 1 || len(got) != 1 {
		t.Fatalf("read %d bytes with requests %v: want 3000 bytes in exactly one GET", total, got)
	}

	for _, name := range []string{"nothing.png", "d/nothing/x.png", "d/frames/0000000001.png/x"} {
		if _, err := fsys.Open(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("open %s: %v, want fs.ErrNotExist", name, err)
		}
		if _, err := fs.Stat(fsys, name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stat %s: %v, want fs.ErrNotExist", name, err)
		}
	}
	if _, err := fs.Stat(c.FS(ctxT(t), objstore.Location{Bucket: "drives", Key: "fleet/v2"}), "."); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a prefix without objects: %v, want fs.ErrNotExist", err)
	}
	if _, err := fs.ReadFile(c.FS(ctxT(t), objstore.Location{Bucket: "nobucket"}), "x"); err == nil || !strings.Contains(err.Error(), "nobucket") {
		t.Errorf("a missing bucket: %v", err)
	}
}

// TestStoreLocations: WriteFile, ReadFile and Expand do the same for a
// local directory and a prefix; the s3 client is made only for an s3://
// location.
func TestStoreLocations(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "sums")
	var logs bytes.Buffer
	made := 0
	st := objstore.NewStore(func() (objstore.Config, error) {
		made++
		c := srv.Config()
		c.PageSize = 2
		return c, nil
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := ctxT(t)
	local := t.TempDir()
	for _, root := range []string{local, "s3://sums/run-1"} {
		join := func(n string) string { return root + "/" + n }
		for i := 4; i >= 0; i-- {
			if err := st.WriteFile(ctx, join(fmt.Sprintf("shard-%d.json", i)), []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.WriteFile(ctx, join("notes.txt"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if root == local && made != 0 {
			t.Fatalf("a local location made the S3 client")
		}
		got, err := st.Expand(ctx, []string{root, join("notes.txt")}, ".json")
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := 0; i < 5; i++ {
			want = append(want, join(fmt.Sprintf("shard-%d.json", i)))
		}
		want = append(want, join("notes.txt"))
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("expand %s:\n got %v\nwant %v", root, got, want)
		}
		for i, f := range want[:5] {
			b, err := st.ReadFile(ctx, f)
			if err != nil || string(b) != fmt.Sprint(i) {
				t.Fatalf("read %s: %q %v", f, b, err)
			}
		}
		if _, err := st.Expand(ctx, []string{join("empty")}, ".json"); err == nil {
			t.Fatalf("expand of nothing under %s succeeded", root)
		}
	}
	if made != 1 {
		t.Fatalf("client made %d times", made)
	}
	if strings.Contains(logs.String(), srv.SecretKey) || strings.Contains(logs.String(), srv.AccessKey) {
		t.Fatalf("logs show a credential: %s", logs.String())
	}
}

// TestCredentialSources: the environment's keys, then the shared
// credentials file under AWS_PROFILE; a wrong key is refused by the server
// and no credential shows in logs or errors.
func TestCredentialSources(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "creds")
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".aws"), 0o700)
	file := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = wrong-secret-0123456789\n\n[fleet]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
		srv.AccessKey, srv.AccessKey, srv.SecretKey)
	os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte(file), 0o600)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		source  string
		refused bool
	}{
		{"environment", map[string]string{objstore.EnvAccessKey: srv.AccessKey, objstore.EnvSecretKey: srv.SecretKey}, "environment", false},
		{"file profile", map[string]string{objstore.EnvProfile: "fleet"}, `profile "fleet"`, false},
		{"file default profile", map[string]string{}, `profile "default"`, true},
		{"wrong environment secret", map[string]string{objstore.EnvAccessKey: srv.AccessKey, objstore.EnvSecretKey: "wrong-secret-0123456789"}, "environment", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env[objstore.EnvEndpoint] = srv.Endpoint
			cfg, err := objstore.ConfigFromEnv(func(k string) string { return tc.env[k] }, home)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(cfg.CredSource, tc.source) {
				t.Fatalf("credentials from %q, want %q", cfg.CredSource, tc.source)
			}
			var logs bytes.Buffer
			c, err := objstore.New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			err = c.Put(ctxT(t), objstore.Location{Bucket: "creds", Key: "probe.txt"}, []byte("x"), nil)
			if tc.refused != (err != nil) {
				t.Fatalf("put: %v (refusal expected: %v)", err, tc.refused)
			}
			all := logs.String() + fmt.Sprint(err)
			for _, secret := range []string{srv.SecretKey, "wrong-secret-0123456789"} {
				if strings.Contains(all, secret) {
					t.Fatalf("a secret shows in logs or errors: %s", all)
				}
			}
		})
	}
	_, err := objstore.ConfigFromEnv(func(k string) string { return map[string]string{objstore.EnvProfile: "nope"}[k] }, home)
	if err == nil || !strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("a missing profile: %v", err)
	}
}
