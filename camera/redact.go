package camera

import "github.com/didoedge/didoedge/internal/redact"

// RedactURL removes the user-info part (user:password@) of an URL so that it
// can be logged. It works on strings that net/url would reject as well.
func RedactURL(raw string) string { return redact.URL(raw) }

// scrub removes every occurrence of the URL's credentials (the whole
// user-info and the password alone) from a message that a library built.
func scrub(msg, rawURL string) string { return redact.Scrub(msg, rawURL) }
