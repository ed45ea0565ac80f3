package host

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
