package camera

import "strings"

// RedactURL removes the user-info part (user:password@) of an URL so that it
// can be logged. It works on strings that net/url would reject as well.
func RedactURL(raw string) string {
	scheme := strings.Index(raw, "://")
	if scheme < 0 {
		return raw
	}
	rest := raw[scheme+3:]
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	at := strings.LastIndex(rest[:authEnd], "@")
	if at < 0 {
		return raw
	}
	return raw[:scheme+3] + "***@" + rest[at+1:]
}

// userInfo returns the raw "user:password" of an URL, or "".
func userInfo(raw string) string {
	scheme := strings.Index(raw, "://")
	if scheme < 0 {
		return ""
	}
	rest := raw[scheme+3:]
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	at := strings.LastIndex(rest[:authEnd], "@")
	if at < 0 {
		return ""
	}
	return rest[:at]
}

// scrub removes every occurrence of the URL's credentials (the whole
// user-info and the password alone) from a message that a library built.
func scrub(msg, rawURL string) string {
	ui := userInfo(rawURL)
	if ui == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, ui, "***")
	if i := strings.Index(ui, ":"); i >= 0 && i+1 < len(ui) {
		msg = strings.ReplaceAll(msg, ui[i+1:], "***")
	}
	return msg
}
