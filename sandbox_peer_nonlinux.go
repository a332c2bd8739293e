//go:build !linux

package agentproc

import "golang.org/x/xerrors"

func moreConfined(int) (string, error) {
	return "", xerrors.Errorf("agentproc: MoreConfined: %w", ErrUnsupported)
}
