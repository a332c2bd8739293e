package agentproc_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeNamesTests holds the guarantees tables to their promise: the
// README's short one and the full one in docs/guarantees.md (every
// "## Guarantees" section of README.md and docs/*.md). Every row names at
// least one test, benchmark or fuzz target, and every name it gives is a
// function in a test file of this module, so a rename or a deleted test
// cannot leave a guarantee pointing at nothing.
func TestReadmeNamesTests(t *testing.T) {
	t.Parallel()
	defined := testFunctions(t)
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for _, file := range append([]string{"README.md"}, docs...) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		section := string(text)
		start := strings.Index(section, "## Guarantees")
		if start < 0 {
			if file == "README.md" {
				t.Fatal("README has no Guarantees section")
			}
			continue
		}
		tables++
		section = section[start:]
		if end := strings.Index(section[1:], "\n## "); end >= 0 {
			section = section[:end+1]
		}
		rows := checkGuarantees(t, file, section, defined)
		if rows == 0 {
			t.Errorf("%s: Guarantees table has no rows", file)
		}
		t.Logf("%s: %d guarantees checked", file, rows)
	}
	if tables == 0 {
		t.Error("no Guarantees table found")
	}
}

// checkGuarantees checks the rows of one Guarantees table: the tests are
// the last cell of each row, whatever the columns before it.
func checkGuarantees(t *testing.T, file, section string, defined map[string]bool) int {
	t.Helper()
	name := regexp.MustCompile("`((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]+)`")
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimSpace(line)
		// Every table line but the header and its separator is a row,
		// however its cells are spaced.
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|-") ||
			strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(line, "|")), "guarantee ") {
			continue
		}
		rows++
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		names := name.FindAllStringSubmatch(cells[len(cells)-1], -1)
		if len(names) == 0 {
			t.Errorf("%s: guarantee %q names no test", file, cells[0])
		}
		for _, n := range names {
			if !defined[n[1]] {
				t.Errorf("%s: guarantee %q names %s, which no test file defines", file, cells[0], n[1])
			}
		}
	}
	return rows
}

// testFunctions returns the names of the Test, Benchmark and Fuzz functions
// of every test file in the module, whatever its build tags.
func testFunctions(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]+)\(`)
	defined := make(map[string]bool)
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return defined
}
