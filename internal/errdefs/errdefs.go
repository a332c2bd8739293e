// Package errdefs holds the sentinel errors that agentproc shares with its
// internal packages. The root package re-exports them under their public
// names (agentproc.ErrInvalidRequest, agentproc.ErrUnsupported), as os does
// with io/fs, so an error made deep inside matches the public sentinel under
// errors.Is without the internal package importing the root one.
package errdefs

import (
	"errors"

	"golang.org/x/xerrors"
)

var (
	// ErrInvalidRequest is agentproc.ErrInvalidRequest: a request or
	// argument that cannot be used.
	ErrInvalidRequest = xerrors.New("agentproc: invalid request")
	// ErrUnsupported is agentproc.ErrUnsupported: a feature this platform
	// or host lacks. It also matches errors.ErrUnsupported.
	ErrUnsupported error = unsupportedError{}
)

// unsupportedError is the type of ErrUnsupported: a comparable value, so
// errors.Is finds it through any wrapping, that also claims to be
// errors.ErrUnsupported.
type unsupportedError struct{}

func (unsupportedError) Error() string { return "agentproc: unsupported on this platform" }

func (unsupportedError) Is(target error) bool { return target == errors.ErrUnsupported }
