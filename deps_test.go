package agentproc_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLibraryAddsNoCommandModules holds the promise that makes the command a
// module of its own: a program importing the library (the root package,
// httpapi and llmtool) gets none of the modules only cmd/agentproc needs,
// such as the MCP SDK, in its go.sum after go mod tidy, nor in its module
// graph (go list -m all). The graph is the stricter check: with the
// command in the root module, graph pruning would keep the MCP SDK out of
// go.sum but not out of the graph, where go get, govulncheck and every
// update tool see it.
func TestLibraryAddsNoCommandModules(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs go mod tidy in a scratch module")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// The modules only the command needs: those its go.mod requires that
	// are not in the library's own module graph.
	ownGraph := goListModules(t, goBin, root)
	var cmdOnly []string
	for mod := range requirements(t, filepath.Join(root, "cmd", "agentproc", "go.mod")) {
		if !ownGraph[mod] && mod != "github.com/agentproc/agentproc" {
			cmdOnly = append(cmdOnly, mod)
		}
	}
	if len(cmdOnly) == 0 {
		t.Fatal("cmd/agentproc/go.mod requires no module of its own: the check would check nothing")
	}

	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module scratch\n\ngo 1.26.0\n\nrequire github.com/agentproc/agentproc v0.0.0\n\nreplace github.com/agentproc/agentproc => "+root+"\n")
	write("main.go", `package main

import (
	"github.com/agentproc/agentproc"
	_ "github.com/agentproc/agentproc/httpapi"
	_ "github.com/agentproc/agentproc/llmtool"
)

func main() { agentproc.New().Close() }
`)
	tidy := exec.Command(goBin, "mod", "tidy")
	tidy.Dir = dir
	tidy.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy in the scratch module: %v\n%s", err, out)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range cmdOnly {
		if bytes.Contains(sum, []byte(mod+" ")) {
			t.Errorf("go.sum of a program importing the library names %s, which only cmd/agentproc needs", mod)
		}
	}
	graph := goListModules(t, goBin, dir)
	for _, mod := range cmdOnly {
		if graph[mod] {
			t.Errorf("the module graph of a program importing the library holds %s, which only cmd/agentproc needs", mod)
		}
	}
	t.Logf("checked %d modules only the command needs: %v", len(cmdOnly), cmdOnly)
}

// goListModules returns the module paths of the module graph of the module
// in dir (go list -m all).
func goListModules(t *testing.T, goBin, dir string) map[string]bool {
	t.Helper()
	list := exec.Command(goBin, "list", "-m", "all")
	list.Dir = dir
	list.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m all in %s: %v", dir, err)
	}
	mods := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			mods[f[0]] = true
		}
	}
	return mods
}

// requirements returns the module paths a go.mod requires.
func requirements(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mods := map[string]bool{}
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "require (":
			inBlock = true
		case inBlock && line == ")":
			inBlock = false
		case inBlock && line != "" && !strings.HasPrefix(line, "//"):
			mods[strings.Fields(line)[0]] = true
		case strings.HasPrefix(line, "require "):
			mods[strings.Fields(line)[1]] = true
		}
	}
	return mods
}
