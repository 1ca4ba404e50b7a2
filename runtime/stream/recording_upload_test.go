package stream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didoedge/didoedge/internal/objstore"
	"github.com/didoedge/didoedge/internal/objstore/s3test"
	"github.com/didoedge/didoedge/internal/testmodels"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// scrape reads the pipeline's /metrics exposition back with
// client_golang's parser: name -> value of the unlabelled series.
func scrape(t *testing.T, p *Pipeline, names ...string) map[string]float64 {
	t.Helper()
	var b bytes.Buffer
	if _, err := p.Metrics().WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	mfs := parseExposition(t, b.String())
	out := map[string]float64{}
	for _, n := range names {
		out[n] = value(sample(mfs, n, nil))
	}
	return out
}

// TestRecordUploads: the pipeline with record.upload (credentials and
// endpoint from the environment, as in production) against a Versity
// Gateway on 127.0.0.1. In event mode the clip that a reload's alarms cut
// is uploaded while the pipeline runs, at
// drives/<vehicle>/<camera>/<file> with the vehicle, camera, models' and
// calibration's sha256 as metadata, and /metrics says so. Then a
// continuous run is stopped: its last file is moved into the queue at
// Close but not uploaded (the uploader stops with Run), and the next
// start uploads it: nothing lost, nothing left on the vehicle.
func TestRecordUploads(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "fleet")
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	client, err := objstore.New(srv.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestSetup(t, "quiet.yaml", testmodels.ConfigZones)
	write := func(cal, section string) {
		text := fmt.Sprintf(testmodels.ConfigYAML, "  url: rtsp://127.0.0.1:1/unused", cal, testmodels.ConfigZones) + section
		if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const upload = "upload: {target: s3://fleet/drives}"
	event := "record: {mode: event, dir: rec, pre_roll: 1s, post_roll: 300ms, maps: [epistemic], " + upload + "}\n"
	write("quiet.yaml", event)
	cfg, err := runconfig.Load(s.config)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"vehicle": cfg.AlertsConfig.Vehicle, "camera": "front", "cameras": "front",
		"depth-sha256": fileSHA256(t, cfg.Depth.Model), "auxue-sha256": fileSHA256(t, cfg.AuxUE.Model),
		// the clip is closed after the reload back to quiet.yaml
		"calibration-sha256": fileSHA256(t, filepath.Join(s.dir, "quiet.yaml"))}

	p, _, stop := startPipeline(t, s, 15, nil)
	frames := func() uint64 { return p.Metrics().Camera(0).Frames.Load() }
	waitFor(t, 30*time.Second, "20 quiet frames", func() bool { return frames() >= 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	write("alarm.yaml", event)
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	n := frames()
	waitFor(t, 30*time.Second, "10 alarmed frames", func() bool { return frames() >= n+10 })
	write("quiet.yaml", event)
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	metrics := []string{"didoedge_upload_uploaded_files_total", "didoedge_upload_uploaded_bytes_total", "didoedge_upload_queued_files",
		"didoedge_upload_queued_bytes", "didoedge_upload_oldest_queued_age_seconds", "didoedge_upload_failed_attempts_total",
		"didoedge_upload_refused_total", "didoedge_record_upload_queued_files_total", "didoedge_record_upload_waiting_files",
		"didoedge_record_upload_discarded_files_total", "didoedge_record_clips_total"}
	waitFor(t, 30*time.Second, "the clip uploaded while the pipeline runs", func() bool {
		return scrape(t, p, metrics...)["didoedge_upload_uploaded_files_total"] == 1
	})
	m := scrape(t, p, metrics...)
	objs := bucket(t, client)
	if len(objs) != 1 {
		t.Fatalf("bucket %v, want one clip", objs)
	}
	var key string
	for k := range objs {
		key = k
	}
	if !strings.HasPrefix(key, "drives/"+want["vehicle"]+"/front/rec-") || !strings.HasSuffix(key, "-clip.mcap") {
		t.Fatalf("key %s", key)
	}
	info, err := client.Stat(context.Background(), objstore.Location{Bucket: "fleet", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got := info.UserMetadata[headerCase(k)]; got != v {
			t.Errorf("%s: metadata %s = %q, want %q", key, k, got, v)
		}
	}
	t.Logf("uploaded %s (%d bytes) with %v", key, info.Size, info.UserMetadata)
	for name, v := range map[string]float64{
		"didoedge_upload_uploaded_files_total": 1, "didoedge_upload_uploaded_bytes_total": float64(info.Size),
		"didoedge_upload_queued_files": 0, "didoedge_upload_queued_bytes": 0, "didoedge_upload_oldest_queued_age_seconds": 0,
		"didoedge_upload_failed_attempts_total": 0, "didoedge_upload_refused_total": 0,
		"didoedge_record_upload_queued_files_total": 1, "didoedge_record_upload_waiting_files": 0,
		"didoedge_record_upload_discarded_files_total": 0, "didoedge_record_clips_total": 1,
	} {
		if m[name] != v {
			t.Errorf("/metrics %s = %v, want %v", name, m[name], v)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if left := vehicleFiles(t, filepath.Join(s.dir, "rec")); len(left) != 0 {
		t.Fatalf("left on the vehicle after the upload: %v", left)
	}

	// A continuous run stopped: its last file waits in the queue.
	continuous := "record: {mode: continuous, dir: rec, maps: [epistemic], " + upload + "}\n"
	write("quiet.yaml", continuous)
	p, _, stop = startPipeline(t, s, 15, nil)
	waitFor(t, 30*time.Second, "10 frames", func() bool { return p.Metrics().Camera(0).Frames.Load() >= 10 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, p, metrics...)
	if m["didoedge_upload_queued_files"] != 1 || m["didoedge_upload_uploaded_files_total"] != 0 || len(bucket(t, client)) != 1 {
		t.Fatalf("after the stop: metrics %v, bucket %v: want the last file queued, not uploaded", m, bucket(t, client))
	}
	// The next start uploads it.
	write("quiet.yaml", event)
	p, _, stop = startPipeline(t, s, 15, nil)
	waitFor(t, 30*time.Second, "the last file of the earlier run uploaded", func() bool {
		return scrape(t, p, metrics...)["didoedge_upload_uploaded_files_total"] == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	objs = bucket(t, client)
	if len(objs) != 2 {
		t.Fatalf("bucket %v, want the clip and the continuous file", objs)
	}
	if left := vehicleFiles(t, filepath.Join(s.dir, "rec")); len(left) != 0 {
		t.Fatalf("left on the vehicle: %v", left)
	}
}

// headerCase is how minio-go names user metadata (the HTTP header's
// canonical form without X-Amz-Meta-).
func headerCase(k string) string {
	parts := strings.Split(k, "-")
	for i, p := range parts {
		parts[i] = strings.ToUpper(p[:1]) + p[1:]
	}
	return strings.Join(parts, "-")
}

// bucket lists the objects of s3://fleet: key -> size.
func bucket(t *testing.T, c *objstore.Client) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for o, err := range c.List(context.Background(), "fleet", "", true) {
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = o.Size
	}
	return out
}

// vehicleFiles lists the files under dir (recordings and the queue).
func vehicleFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
