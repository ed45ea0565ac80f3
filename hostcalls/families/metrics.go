package families

// ActiveProcesses returns the process runs in progress; 0 when the spawn
// family is not built (it may be left out by build tag, so it is reached
// through an interface, not imported).
func (s *Set) ActiveProcesses() int {
	if sp, ok := s.shared["spawn"].(interface{ Active() int }); ok {
		return sp.Active()
	}
	return 0
}
