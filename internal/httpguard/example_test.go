package httpguard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/didoedge/didoedge/internal/httpguard"
)

// A listener serves its own names only, and a changing request needs the
// proof header.
func ExampleWrap() {
	h := httpguard.Wrap(httpguard.Policy{Listener: "debug page", HostsKey: "http.allowed_hosts", Hosts: []string{"van-07.local"}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	for _, r := range []struct{ method, host, proof string }{
		{"GET", "127.0.0.1:8080", ""},
		{"GET", "van-07.local:8080", ""},
		{"GET", "rebind.test:8080", ""},
		{"POST", "127.0.0.1:8080", ""},
		{"POST", "127.0.0.1:8080", "1"},
	} {
		req := httptest.NewRequest(r.method, "/api/cameras", nil)
		req.Host = r.host
		if r.proof != "" {
			req.Header.Set(httpguard.ProofHeader, r.proof)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(r.method, r.host, r.proof, rec.Code)
	}
	// Output:
	// GET 127.0.0.1:8080  200
	// GET van-07.local:8080  200
	// GET rebind.test:8080  421
	// POST 127.0.0.1:8080  403
	// POST 127.0.0.1:8080 1 200
}
