//go:build wasip1

// Command abi2mod is a module built for ABI version 2 (host/testdata/oldabi),
// which the host must refuse at load, naming the version.
package main

import "lemon/host/testdata/oldabi"

func init() { oldabi.Version = 2 }

func main() {}
