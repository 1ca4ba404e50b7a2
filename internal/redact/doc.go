// Package redact keeps credentials out of logs, metrics, pages and error
// messages: it removes the user-info part of URLs and scrubs a URL's
// credentials from messages that libraries built around it.
package redact
