package protocol

import (
	"strings"
	"testing"
)

// TestAdv3NodeNameAmbiguous: a node name shaped like a nodeId, or with a
// bidi override or a zero-width character, is refused; names next to
// those shapes pass.
func TestAdv3NodeNameAmbiguous(t *testing.T) {
	id := "node-" + strings.Repeat("0123456789abcdef", 2)
	for _, bad := range []string{id, " " + id + " ", "build\u200b-box", "build\u202ebox", "\ufeffbox"} {
		if _, e := NormalizeNodeName("name", bad); e == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(e.Message, bad) {
			t.Errorf("the error echoes the name: %s", e.Message)
		}
	}
	for _, good := range []string{"build-box", "node-1", id[:len(id)-1], id + "0", "node-" + strings.Repeat("0123456789ABCDEF", 2),
		"Köln-рабочий", "机器-1"} {
		if n, e := NormalizeNodeName("name", good); e != nil || n != good {
			t.Errorf("%q: %q, %v", good, n, e)
		}
	}
}
