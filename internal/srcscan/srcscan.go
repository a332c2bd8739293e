// Package srcscan walks the module's non-test Go files for the tests that
// hold a rule about where something may be written (no /proc path outside
// internal/procfs, no pidfd call outside internal/pidfd) or how (no
// function over 150 lines: TestNoLongFunction, here). It is used by tests
// only.
package srcscan

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Hit is one place a rule's finder matched.
type Hit struct {
	File string // relative to the module root
	Line int
	What string
}

func (h Hit) String() string { return fmt.Sprintf("%s:%d: %s", h.File, h.Line, h.What) }

// Find is what a rule looks for in one parsed file: the line and a
// description of each match.
type Find func(fset *token.FileSet, f *ast.File) []Hit

// Module parses every non-test Go file of the module whose root is two
// directories above own (the calling test's package directory, an
// internal package), skipping hidden, underscore, testdata and
// node_modules directories and the root's build directory (the Makefile's
// git-ignored output: a Wine prefix whose z: drive links to /, a VM's
// kernel and initrd, none of it the module's source). It returns how many files it parsed, the
// matches in own, and the matches elsewhere. A caller should check that
// files and inOwn are not zero: a walk that saw nothing checks nothing.
func Module(own string, find Find) (files, inOwn int, outside []Hit, err error) {
	own, err = filepath.Abs(own)
	if err != nil {
		return 0, 0, nil, err
	}
	root := filepath.Dir(filepath.Dir(own))
	if mod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.Contains(string(mod), "module github.com/agentproc/agentproc\n") {
		return 0, 0, nil, errors.Join(fmt.Errorf("%s is not the module's root", root), err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walking %s: %w", path, err)
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path == filepath.Join(root, "build") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		hits := find(fset, f)
		if filepath.Dir(path) == own {
			inOwn += len(hits)
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, h := range hits {
			h.File = rel
			outside = append(outside, h)
		}
		return nil
	})
	return files, inOwn, outside, err
}
