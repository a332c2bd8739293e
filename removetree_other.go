//go:build !linux

package agentproc

import "os"

// removeTree is os.RemoveAll where no sandbox makes temp dirs for trees
// (see removetree_linux.go).
func removeTree(dir string) error { return os.RemoveAll(dir) }
