package sdk

import (
	"fmt"

	"lemon/host/abi/wire"
)

// CallRaw makes a host call whose result is raw bytes rather than JSON
// (blob.read): args is encoded as JSON (nil sends {}), the result comes
// back unparsed. A host error comes back as *protocol.Error.
func CallRaw(fn ImportFunc, args any) ([]byte, error) {
	in := emptyArgs
	if args != nil {
		var err error
		if in, err = wire.Marshal(args); err != nil {
			return nil, fmt.Errorf("sdk: marshal host-call args: %w", err)
		}
	}
	return CallBytes(fn, in)
}

// CallBytes makes a host call with args already encoded as JSON and
// returns the result unparsed, for wrappers that avoid guest-side
// reflection (about 1 µs a byte). A host error comes back as
// *protocol.Error.
func CallBytes(fn ImportFunc, args []byte) ([]byte, error) {
	status, res := callImport(fn, args)
	if status != 0 {
		return nil, hostError(res)
	}
	return res, nil
}

// SendBytes makes a host call with args already encoded as JSON and
// leaves a success's result unread (see Call with a nil out), for
// wrappers that need only success. A host error comes back as
// *protocol.Error.
func SendBytes(fn ImportFunc, args []byte) error {
	status, res := callImportDiscard(fn, args, true)
	if status != 0 {
		return hostError(res)
	}
	return nil
}
