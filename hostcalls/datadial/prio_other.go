//go:build !linux

package datadial

// RunBulk runs fn (thread priorities are Linux only).
func RunBulk(fn func()) { fn() }
