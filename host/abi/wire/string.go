package wire

// AppendString appends s as a JSON string exactly as encoding/json writes
// it (HTML-escaped: <, >, &, U+2028 and U+2029 as \u escapes; invalid
// UTF-8 as \ufffd), for modules that write a fixed-shape payload by hand
// (plugins/hostinfo/shape.AppendPayload).
func AppendString(b []byte, s string) []byte { return appendString(b, s) }
