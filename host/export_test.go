package host

import (
	"sync"

	"github.com/tetratelabs/wazero/api"
)

// Mallocs is how many lemon_malloc calls m's idle instances made (tests
// of the lemon_input path).
func Mallocs(m *Module) int {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	n := 0
	for _, inst := range m.pool.idle {
		n += inst.mallocs
	}
	return n
}

// CallsRunning reports how many calls run on m's instances' memories now
// (tests of Host.Close during a call).
func CallsRunning() int {
	memoriesMu.Lock()
	defer memoriesMu.Unlock()
	n := 0
	for _, m := range memories {
		m.mu.Lock()
		n += m.users
		m.mu.Unlock()
	}
	return n
}

// MemoryCount is how many instance memories were made so far.
func MemoryCount() int {
	memoriesMu.Lock()
	defer memoriesMu.Unlock()
	return len(memories)
}

// MemoriesMapped counts the instance memories made after the first since
// that are still mapped.
func MemoriesMapped(since int) int {
	memoriesMu.Lock()
	defer memoriesMu.Unlock()
	n := 0
	for _, m := range memories[since:] {
		if m.mapped() {
			n++
		}
	}
	return n
}

var (
	memoriesMu sync.Mutex
	memories   []*linearMemory
)

func init() {
	testMemoryCreated = func(m *linearMemory) {
		memoriesMu.Lock()
		memories = append(memories, m)
		memoriesMu.Unlock()
	}
}

// SetInstantiatedHook makes f see every module instance right after the
// runtime instantiates it (before its initialization runs); nil removes
// the hook.
func SetInstantiatedHook(f func(api.Module)) { testInstantiated = f }
