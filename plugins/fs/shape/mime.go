// Package shape holds the fs module's spec shaping of its read methods
// (docs/FS.md, "Primitives"): the MIME table, node.fs.stat and
// node.fs.list payload encoding from the raw figures of the fs read
// primitives. It has no wasm imports, so native tests and benchmarks run
// the very code the module runs.
package shape

import "strings"

// The MIME table: name-derived, never from content, built in so every
// node answers the same regardless of its /etc/mime.types. A different fs
// module version may ship a different table; nothing in the host knows it.
var mimeByExt = map[string]string{
	"txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown",
	"csv": "text/csv", "tsv": "text/tab-separated-values", "html": "text/html", "htm": "text/html",
	"css": "text/css", "js": "text/javascript", "mjs": "text/javascript", "xml": "application/xml",
	"json": "application/json", "yaml": "application/yaml", "yml": "application/yaml",
	"toml": "application/toml", "pdf": "application/pdf", "zip": "application/zip",
	"gz": "application/gzip", "tgz": "application/gzip", "tar": "application/x-tar",
	"wasm": "application/wasm", "sh": "application/x-sh", "py": "text/x-python",
	"go": "text/x-go", "c": "text/x-c", "h": "text/x-c", "rs": "text/x-rust",
	"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
	"webp": "image/webp", "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon",
	"mp3": "audio/mpeg", "wav": "audio/wav", "ogg": "audio/ogg", "mp4": "video/mp4",
	"webm": "video/webm", "mov": "video/quicktime",
}

// Overrides adds or replaces table entries at build time, for a module
// shipped with a different table without a source change:
//
//	go build -ldflags '-X lemon/plugins/fs/shape.Overrides=txt=text/x-lemon;md=text/x-md' ./plugins/fs
//
// Each entry is ext=type (ext in lower case), separated by ';'. Empty in
// the built-in module.
var Overrides string

func init() {
	for _, kv := range strings.Split(Overrides, ";") {
		if ext, typ, ok := strings.Cut(kv, "="); ok && ext != "" && typ != "" {
			mimeByExt[strings.ToLower(ext)] = typ
		}
	}
	buildMimeSlots()
}

// MIME infers a MIME type from the extension of a name's last path
// component (case-insensitive); unknown names give
// "application/octet-stream".
func MIME(name string) string { return mimeOf(name) }

func mimeOf[S ~string | ~[]byte](name S) string {
	// One scan from the end for the last '.' of the last component.
	i := len(name) - 1
	for ; i >= 0 && name[i] != '.' && name[i] != '/'; i-- {
	}
	if i <= 0 || name[i] == '/' || name[i-1] == '/' || i == len(name)-1 {
		return "application/octet-stream"
	}
	ext := name[i+1:]
	if m, ok := mimeByExt[string(ext)]; ok {
		return m
	}
	if m, ok := mimeByExt[strings.ToLower(string(ext))]; ok {
		return m
	}
	return "application/octet-stream"
}
