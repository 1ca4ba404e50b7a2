package alerts

// joinPath appends key to a dotted key path for error messages.
func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}
