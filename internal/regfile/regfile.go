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

// Read returns the content of the regular file at path, at most max
// bytes. Errors: the open or read error of the OS (an *fs.PathError,
// which names the path), ErrNotRegular, ErrTooLarge.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, ErrTooLarge
	}
	return data, nil
}
