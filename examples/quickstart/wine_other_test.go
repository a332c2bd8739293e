//go:build !windows

package main

// underWine is false off Windows.
func underWine() bool { return false }
