package redact

import "strings"

// URL removes the user-info part (user:password@) of an URL so that it can
// be logged. It works on strings that net/url would reject as well.
func URL(raw string) string {
	at, ok := userInfoEnd(raw)
	if !ok {
		return raw
	}
	scheme := strings.Index(raw, "://")
	return raw[:scheme+3] + "***@" + raw[at+1:]
}

// HasUserInfo reports whether raw carries a user-info part (user@ or
// user:password@).
func HasUserInfo(raw string) bool {
	_, ok := userInfoEnd(raw)
	return ok
}

// userInfoEnd returns the index of the '@' that ends raw's user info.
func userInfoEnd(raw string) (int, bool) {
	scheme := strings.Index(raw, "://")
	if scheme < 0 {
		return 0, false
	}
	rest := raw[scheme+3:]
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	at := strings.LastIndex(rest[:authEnd], "@")
	if at < 0 {
		return 0, false
	}
	return scheme + 3 + at, true
}

// UserInfo returns the raw "user:password" of an URL, or "".
func UserInfo(raw string) string {
	at, ok := userInfoEnd(raw)
	if !ok {
		return ""
	}
	return raw[strings.Index(raw, "://")+3 : at]
}

// Scrub removes every occurrence of the URL's credentials (the whole user
// info, and the password alone) from a message that a library built.
func Scrub(msg, rawURL string) string {
	ui := UserInfo(rawURL)
	if ui == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, ui, "***")
	if i := strings.Index(ui, ":"); i >= 0 && i+1 < len(ui) {
		msg = strings.ReplaceAll(msg, ui[i+1:], "***")
	}
	return msg
}
