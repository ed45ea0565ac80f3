package main

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// termSafe returns s fit to print on the operator's terminal: unchanged
// when it is valid UTF-8 without control characters (C0, C1, DEL) or
// invisible format characters (bidi overrides, zero-width), else quoted
// with those escaped ("x\x1b]0;...", strconv.QuoteToGraphic). Every
// string the CLI prints that came from a node or the controller (a file
// name, a path, a node name) goes through it: a raw escape could rewrite
// the screen, for example hide what `lemon fs rm` is about to delete.
func termSafe(s string) string {
	if !utf8.ValidString(s) {
		return strconv.QuoteToGraphic(s)
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return strconv.QuoteToGraphic(s)
		}
	}
	return s
}
