// Package schema embeds the versioned JSON Schemas (draft 2020-12) of every
// payload the alerts publisher sends, and a small validator for the subset
// of JSON Schema they use: type, required, properties,
// additionalProperties (boolean), enum, const, minimum, maximum, pattern
// and items. Schemas using any other keyword are rejected when compiled,
// so that no constraint is silently ignored.
package schema
