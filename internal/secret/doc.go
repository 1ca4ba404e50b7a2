// Package secret reads passwords named by a config: from a file or an
// environment variable, never from the config itself, so that no secret
// ends up in a config file, a log line or an error message.
package secret
