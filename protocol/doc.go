// Package protocol defines the wire protocol shared by the controller, the
// node worker, the operator client and the guest modules: frames, the
// connect/hello-ok handshake, error codes (protocol codes plus spec domain
// codes in error.details.code), scopes and JSON limits.
//
// The package depends on the standard library only, so guest modules built
// for wasip1 can import it and validate parameters with the same code the
// controller uses (docs/PROTOCOL.md).
package protocol
