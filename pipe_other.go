//go:build !linux && !windows

package agentproc

import "os"

// growPipe is a no-op where the pipe size cannot be set.
func growPipe(*os.File) {}
