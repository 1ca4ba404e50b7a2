// Package yamlstrict decodes YAML configuration files strictly: unknown keys
// are errors, and every error names the key path (zones[2].polygon) and its
// line, so that a user can find the mistake in a long file.
package yamlstrict
