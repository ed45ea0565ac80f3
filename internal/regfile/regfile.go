// Package regfile reads an operator-named file (a CA bundle, a policy)
// with bounds: the file must be a regular file, is opened without
// blocking (a FIFO without a writer would otherwise wait forever) and is
// read up to a size limit (a device such as /dev/zero would otherwise
// fill memory). See docs/DEPLOY.md, "TLS", and docs/POLICY.md.
package regfile

import (
	"errors"
	"io"
	"os"
	"syscall"
)

var (
	// ErrNotRegular: the path names a directory, FIFO, socket or device.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is longer than the limit.
	ErrTooLarge = errors.New("file too large")
)

// Open opens the regular file at path for reading without blocking on a
// FIFO (O_NONBLOCK; reads of a regular file are unaffected). Errors: the
// OS's open or stat error (an *fs.PathError, which names the path), or
// ErrNotRegular for a directory, FIFO, socket or device.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, ErrNotRegular
	}
	return f, nil
}

// Read returns the content of the regular file at path, at most max
// bytes. Errors: those of Open, the OS's read error, ErrTooLarge.
func Read(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, ErrTooLarge
	}
	return data, nil
}
