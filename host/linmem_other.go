//go:build !unix

package host

import "errors"

func reserve(uint64) ([]byte, error) { return nil, errors.New("no mmap on this platform") }

func release([]byte) {}
