package spawn

// Active returns the runs in progress (at most Config.MaxActive), for the
// node's lemon_node_processes_active gauge (docs/OPERATIONS.md). A nil
// Spawner has none.
func (s *Spawner) Active() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}
