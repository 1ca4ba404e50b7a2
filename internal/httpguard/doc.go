// Package httpguard is the one browser-facing check in front of every
// HTTP listener of the runtime (the debug page with /metrics, /healthz and
// /readyz; the live view with its control API).
//
// Two attacks reach a listener on 127.0.0.1 through the operator's own
// browser, and the guard stops both:
//
//   - DNS rebinding: a page from http://evil.example:8080/ whose name
//     later resolves to 127.0.0.1 is same-origin with itself, so its
//     fetches read and change the vehicle. Its requests carry
//     Host: evil.example:8080. The guard answers 421 Misdirected Request
//     to every Host that is not a name or address the listener serves:
//     loopback addresses, the address the connection arrived on, the
//     names localhost and *.localhost (which browsers resolve to loopback
//     themselves), and the names configured (http.allowed_hosts,
//     live.allowed_hosts). A rebinding needs a name, so an IP literal the
//     connection really arrived on cannot be one.
//   - Cross-site requests (CSRF) from a page of another origin, which
//     the browser sends with the right Host: every request that is not
//     GET or HEAD must carry the header X-Didoedge-Request: 1 or the
//     listener's token. A page of another origin cannot add a custom
//     header without a CORS preflight (OPTIONS), and the guard refuses
//     every preflight (403, no Access-Control-Allow-* header ever).
package httpguard
