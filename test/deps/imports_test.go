// Package deps holds the import rules of the repository, as a test
// (docs/ARCHITECTURE.md, "The I/O rule" and the package table): a change
// that imports across one of these lines fails `make test`.
package deps

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/cairn-fs/cairn/"

type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string // not the tests'
}

func packages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Dir,Imports", "github.com/cairn-fs/cairn/...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var ps []pkg
	dec := json.NewDecoder(out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(ps) < 20 {
		t.Fatalf("go list found %d packages", len(ps))
	}
	return ps
}

func under(path, dir string) bool { return path == mod+dir || strings.HasPrefix(path, mod+dir+"/") }

// TestImportRules:
//   - a front end imports, of Cairn, only the store API, access control
//     and the other front ends: nothing below the store;
//   - only cmd imports internal/node, and nothing imports cmd;
//   - the core (namespace, log, blobs, volumes, placement, KV, store,
//     replication, failure detector) does not import net/http, and the
//     state machine and placement touch no os or net, and name blobs
//     with internal/cas, not the blob store;
//   - the store imports neither the transport nor replication: it
//     declares what it needs of replication (store.Replication), and the
//     types it shares with them live in leaves (cas.Blob, placement's
//     QuorumError and error kinds, minindex).
func TestImportRules(t *testing.T) {
	core := []string{"internal/meta", "internal/consensus", "internal/blob", "internal/volume",
		"internal/placement", "internal/kv", "internal/store", "internal/replica", "internal/cluster", "internal/vfs", "internal/clock", "internal/core"}
	pure := []string{"internal/meta", "internal/placement"}
	for _, p := range packages(t) {
		for _, imp := range p.Imports {
			switch {
			case under(p.ImportPath, "internal/frontend") && strings.HasPrefix(imp, mod) &&
				!under(imp, "internal/store") && !under(imp, "internal/access") && !under(imp, "internal/frontend"):
				t.Errorf("front end %s imports %s: front ends use the store API (internal/store) only", p.ImportPath, imp)
			case under(imp, "internal/node") && !under(p.ImportPath, "cmd") && !under(p.ImportPath, "internal/node"):
				t.Errorf("%s imports %s: only cmd wires a node", p.ImportPath, imp)
			case under(imp, "cmd"):
				t.Errorf("%s imports %s: nothing imports a command", p.ImportPath, imp)
			case imp == "net/http" && slices.ContainsFunc(core, func(c string) bool { return under(p.ImportPath, c) }):
				t.Errorf("core package %s imports net/http", p.ImportPath)
			case (imp == "os" || imp == "net") && slices.ContainsFunc(pure, func(c string) bool { return under(p.ImportPath, c) }):
				t.Errorf("%s imports %s: it must stay free of I/O", p.ImportPath, imp)
			case under(imp, "internal/blob") && slices.ContainsFunc(pure, func(c string) bool { return under(p.ImportPath, c) }):
				t.Errorf("%s imports %s: a blob's name is internal/cas's Hash, not the blob store's", p.ImportPath, imp)
			case under(p.ImportPath, "internal/store") && (under(imp, "internal/transport") || under(imp, "internal/replica")):
				t.Errorf("%s imports %s: the store reaches replication through store.Replication, and shares its types through leaves (cas, placement, minindex)", p.ImportPath, imp)
			}
		}
	}
}

// TestDocPerPackage: every package under internal/ has a doc.go saying
// what it owns and what it must not do.
func TestDocPerPackage(t *testing.T) {
	for _, p := range packages(t) {
		if !under(p.ImportPath, "internal") {
			continue
		}
		if _, err := os.Stat(filepath.Join(p.Dir, "doc.go")); err != nil {
			t.Errorf("%s has no doc.go", p.ImportPath)
		}
	}
}

// clockCalls are the calls that read the wall clock or start a timer on
// it: the core takes them from its clock.Clock instead (the clock rule).
var clockCalls = map[string][]string{
	"time":    {"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"},
	"context": {"WithTimeout", "WithDeadline"},
}

// TestClockRule: the core's timers, tickers, deadlines and reads of the
// time go through internal/clock (a clock.Clock in each Config), so that a
// fake clock or the simulator's bubble drives all of them. A package may
// still name time.Now as a default value; it may not call it.
func TestClockRule(t *testing.T) {
	core := []string{"internal/meta", "internal/consensus", "internal/blob", "internal/volume", "internal/placement",
		"internal/kv", "internal/store", "internal/replica", "internal/cluster", "internal/transport", "internal/core"}
	checked := 0
	for _, p := range packages(t) {
		if !slices.ContainsFunc(core, func(c string) bool { return under(p.ImportPath, c) }) {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(p.Dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(clockCalls[x.Name], sel.Sel.Name) {
					t.Errorf("%s: %s.%s: the core takes time from its clock.Clock (internal/clock)", fset.Position(call.Pos()), x.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d files", checked)
	}
}
