//go:build unix

package host

import (
	"errors"
	"math"

	"golang.org/x/sys/unix"
)

// reserve maps n bytes of zero-filled address space without committing
// memory (MAP_NORESERVE); pages are committed as the guest touches them.
func reserve(n uint64) ([]byte, error) {
	if n == 0 || n > math.MaxInt {
		return nil, errors.New("bad reservation size")
	}
	return unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
}

// release unmaps a reservation.
func release(b []byte) { _ = unix.Munmap(b) }
