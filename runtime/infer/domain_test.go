package infer

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/runtime/domain"
)

// testDomainRecord fits a record of each statistic on random frames.
func testDomainRecord(t *testing.T, stat string) *domain.Record {
	t.Helper()
	l := domain.DefaultLayout(true)
	rng := rand.New(rand.NewPCG(11, 12))
	frames := make([][]float64, 40)
	for i := range frames {
		frames[i] = make([]float64, l.Dim())
		for j := range frames[i] {
			frames[i][j] = rng.NormFloat64()*float64(j+1) + 0.1*float64(j)
		}
	}
	r, err := domain.Fit(l, frames, domain.FitOptions{Statistic: stat, Source: "test frames"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSpecDomainRecordRoundTrip: an AuxUE spec with a training-domain
// record (either statistic) is read back equal, bit for bit in every
// float, and the record answers the same distances; a spec without one
// loads and says it has none.
func TestSpecDomainRecordRoundTrip(t *testing.T) {
	base, err := ParseIOSpec([]byte(auxSpecYAML), "auxue.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := base.DomainRecord(); !errors.Is(err, ErrNoDomainRecord) {
		t.Fatalf("spec without a record: %v, want ErrNoDomainRecord", err)
	}
	for _, stat := range []string{domain.Mahalanobis, domain.KNN} {
		s := base
		info := *base.AuxUE
		info.Domain = testDomainRecord(t, stat)
		s.AuxUE = &info
		b, err := s.Marshal("with a domain record")
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseIOSpec(b, "round-trip.yaml")
		if err != nil {
			t.Fatalf("%s: %v", stat, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("%s: round trip changed the spec:\n%s", stat, b)
		}
		rec, err := back.DomainRecord()
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float64, rec.Layout.Dim())
		for i := range x {
			x[i] = float64(i)
		}
		d1, err1 := info.Domain.Distance(x, info.Domain.NewScratch())
		d2, err2 := rec.Distance(x, rec.NewScratch())
		if err1 != nil || err2 != nil || d1 != d2 {
			t.Errorf("%s: distance %v (%v) before, %v (%v) after the round trip", stat, d1, err1, d2, err2)
		}
	}
}

// TestSpecDomainRecordErrors: a broken record fails the spec with its key.
func TestSpecDomainRecordErrors(t *testing.T) {
	base, _ := ParseIOSpec([]byte(auxSpecYAML), "auxue.yaml")
	info := *base.AuxUE
	info.Domain = testDomainRecord(t, domain.Mahalanobis)
	base.AuxUE = &info
	b, err := base.Marshal("")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new, want string }{
		{"version: 1", "version: 7", "auxue.domain.version: 7"},
		{"statistic: mahalanobis", "statistic: energy", "auxue.domain.statistic"},
		{"map_bands: 4", "map_bands: 0", "auxue.domain.layout: map_bands"},
	} {
		text := strings.Replace(string(b), c.old, c.new, 1)
		if text == string(b) {
			t.Fatalf("edit %q did not apply", c.old)
		}
		if _, err := ParseIOSpec([]byte(text), "auxue.yaml"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "auxue.yaml") {
			t.Errorf("%s: err %v, want %q", c.new, err, c.want)
		}
	}
}
