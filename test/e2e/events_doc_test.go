package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/inbox"
)

const (
	eventsDoc   = "../../docs/events.md"
	servicesDir = "../../services"
	eventsPkg   = "../../pkg/events"
)

// published is one (daemon, resource, verb) the code publishes.
type published struct{ daemon, resource, verb string }

func (p published) String() string { return p.daemon + ": " + p.resource + "." + p.verb }

// constValues returns the string constants declared in the Go files (not tests) of dir, by
// name, resolving references to other constants of the same package and, through
// external, to constants of package events ("events.VerbClusterCreated").
func constValues(t *testing.T, dir string, external map[string]string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]ast.Expr{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							exprs[n.Name] = vs.Values[i]
						}
					}
				}
			}
		}
	}
	out := map[string]string{}
	for name := range exprs {
		if v, ok := evalString(exprs[name], exprs, external, 0); ok {
			out[name] = v
		}
	}
	return out
}

// evalString evaluates a constant expression that is a string literal, a package constant or
// events.<Const>.
func evalString(e ast.Expr, local map[string]ast.Expr, external map[string]string, depth int) (string, bool) {
	if depth > 8 {
		return "", false
	}
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			s, err := strconv.Unquote(x.Value)
			return s, err == nil
		}
	case *ast.Ident:
		if v, ok := local[x.Name]; ok {
			return evalString(v, local, external, depth+1)
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok && id.Name == "events" {
			v, ok := external[x.Sel.Name]
			return v, ok
		}
	case *ast.CallExpr: // events.Resource("x")
		if len(x.Args) == 1 {
			return evalString(x.Args[0], local, external, depth+1)
		}
	}
	return "", false
}

// publishedByCode finds every Outbox.Record(ctx, cluster, resource, verb, key, data) and
// Publisher.Publish call (same arguments) in the daemons' source, and each daemon that builds
// an inbox consumer with Runtime.Inbox (which publishes inbox.rejected). A verb held in a variable (chosen at run time) stands for every
// Verb* constant of its package.
func publishedByCode(t *testing.T) []published {
	t.Helper()
	eventConsts := constValues(t, eventsPkg, nil)
	daemons, err := os.ReadDir(servicesDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[published]bool{}
	for _, d := range daemons {
		if !d.IsDir() {
			continue
		}
		daemon := d.Name()
		err := filepath.WalkDir(filepath.Join(servicesDir, daemon), func(dir string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return err
			}
			local := constValues(t, dir, eventConsts)
			fset := token.NewFileSet()
			pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
			if err != nil {
				return err
			}
			exprs := map[string]ast.Expr{}
			for name := range local {
				exprs[name] = &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(local[name])}
			}
			var dynamic []string // resources published with a run-time verb
			for _, p := range pkgs {
				for _, f := range p.Files {
					ast.Inspect(f, func(n ast.Node) bool {
						call, ok := n.(*ast.CallExpr)
						if !ok {
							return true
						}
						if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Inbox" && len(call.Args) == 3 {
							// daemon.Runtime.Inbox: the daemon's inbox consumer answers what it
							// does not apply with inbox.rejected (pkg/daemon/inbox.go).
							seen[published{daemon, string(events.ResourceInbox), events.VerbInboxRejected}] = true
							return true
						}
						if len(call.Args) != 6 {
							return true
						}
						sel, ok := call.Fun.(*ast.SelectorExpr)
						if !ok || sel.Sel.Name != "Record" && sel.Sel.Name != "Publish" {
							return true
						}
						pos := fset.Position(call.Pos())
						res, ok := evalString(call.Args[2], exprs, eventConsts, 0)
						if !ok {
							t.Errorf("%s: %s with a resource that is not an events.Resource constant", pos, sel.Sel.Name)
							return true
						}
						if verb, ok := evalString(call.Args[3], exprs, eventConsts, 0); ok {
							seen[published{daemon, res, verb}] = true
						} else {
							dynamic = append(dynamic, res)
						}
						return true
					})
				}
			}
			for name, v := range local {
				if !strings.HasPrefix(name, "Verb") || len(dynamic) == 0 {
					continue
				}
				// The verb constant belongs to one of the resources published at run time.
				res := dynamic[0]
				for _, r := range dynamic {
					if registered(daemon, r, v) {
						res = r
					}
				}
				seen[published{daemon, res, v}] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var out []published
	for p := range seen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func registered(daemon, resource, verb string) bool {
	return slices.ContainsFunc(events.Published, func(e events.PublishedEvent) bool {
		return e.PublishedBy(daemon) && string(e.Resource) == resource && e.Verb == verb
	})
}

func TestEventsDoc_RegistryMatchesWhatTheDaemonsPublish(t *testing.T) {
	code := publishedByCode(t)
	if len(code) < 10 {
		t.Fatalf("found only %d published events in the source: %v", len(code), code)
	}
	for _, p := range code {
		if !registered(p.daemon, p.resource, p.verb) {
			t.Errorf("%s is published but not in events.Published (pkg/events/published.go) and docs/events.md", p)
		}
	}
	types := map[string]bool{}
	for _, e := range events.Published {
		if types[e.Type()] {
			t.Errorf("%s is listed twice in events.Published", e.Type())
		}
		types[e.Type()] = true
		if len(e.Publishers) == 0 {
			t.Errorf("events.Published: %s has no publisher", e.Type())
		}
		for _, d := range e.Publishers {
			if !slices.Contains(code, published{d, string(e.Resource), e.Verb}) {
				t.Errorf("events.Published lists %s by %s, but %s's code never publishes it", e.Type(), d, d)
			}
		}
		if _, err := events.Subject("demo", e.Resource, e.Verb); err != nil {
			t.Errorf("%s: %v", e.Type(), err)
		}
	}
}

// docSection is one "### <type>" section of docs/events.md.
type docSection struct {
	body     string
	examples [][]byte
}

func readEventsDoc(t *testing.T) map[string]*docSection {
	t.Helper()
	b, err := os.ReadFile(eventsDoc)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]*docSection{}
	var cur *docSection
	var block *bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case block != nil && line == "```":
			cur.examples = append(cur.examples, block.Bytes())
			block = nil
		case block != nil:
			block.WriteString(line + "\n")
		case strings.HasPrefix(line, "## "):
			cur = nil
		case strings.HasPrefix(line, "### "):
			typ := strings.Trim(strings.TrimPrefix(line, "### "), "` ")
			if _, dup := sections[typ]; dup {
				t.Errorf("docs/events.md: two sections for %s", typ)
			}
			cur = &docSection{}
			sections[typ] = cur
		case cur != nil && line == "```json":
			block = &bytes.Buffer{}
		case cur != nil:
			cur.body += line + "\n"
		}
	}
	return sections
}

// eventData are the Go types of the data of the event types that carry data.
var eventData = map[string]reflect.Type{
	"io.hostplane.pki.ready": reflect.TypeFor[struct {
		Serial string `json:"serial"`
	}](),
	"io.hostplane.pki.rotated": reflect.TypeFor[struct {
		Serial string `json:"serial"`
	}](),
	"io.hostplane.component.progressing": reflect.TypeFor[api.ControlPlaneComponent](),
	"io.hostplane.component.available":   reflect.TypeFor[api.ControlPlaneComponent](),
	"io.hostplane.component.degraded":    reflect.TypeFor[api.ControlPlaneComponent](),
	"io.hostplane.inbox.rejected":        reflect.TypeFor[inbox.Rejection](),
	"io.hostplane.machine.created":       reflect.TypeFor[api.Machine](),
	"io.hostplane.machine.joined":        reflect.TypeFor[api.Machine](),
	"io.hostplane.machine.faulted":       reflect.TypeFor[api.Machine](),
	"io.hostplane.machine.deleted":       reflect.TypeFor[api.Machine](),
	"io.hostplane.machine.status":        reflect.TypeFor[api.Machine](),
	"io.hostplane.backup.created":        reflect.TypeFor[api.Backup](),
	"io.hostplane.backup.completed":      reflect.TypeFor[api.Backup](),
	"io.hostplane.backup.failed":         reflect.TypeFor[api.Backup](),
	"io.hostplane.backup.deleted":        reflect.TypeFor[api.Backup](),
	"io.hostplane.backup.restored": reflect.TypeFor[struct {
		Cluster string `json:"cluster"`
		Backup  string `json:"backup"`
		InPlace bool   `json:"inPlace"`
	}](),
}

func TestEventsDoc_HasASectionWithAValidExamplePerPublishedType(t *testing.T) {
	sections := readEventsDoc(t)
	for _, e := range events.Published {
		s, ok := sections[e.Type()]
		if !ok {
			t.Errorf("docs/events.md has no section \"### %s\"", e.Type())
			continue
		}
		for _, want := range []string{"`" + e.SubjectPattern() + "`", "**Publisher:** " + strings.Join(e.Publishers, ", "), "`" + e.Key + "`"} {
			if !strings.Contains(s.body, want) {
				t.Errorf("docs/events.md, %s: does not say %s", e.Type(), want)
			}
		}
		if len(s.examples) == 0 {
			t.Errorf("docs/events.md, %s: no ```json example", e.Type())
		}
		for i, ex := range s.examples {
			if err := checkExample(e, ex); err != nil {
				t.Errorf("docs/events.md, %s, example %d: %v", e.Type(), i+1, err)
			}
		}
	}
	for typ := range sections {
		if !slices.ContainsFunc(events.Published, func(e events.PublishedEvent) bool { return e.Type() == typ }) {
			t.Errorf("docs/events.md documents %s, which events.Published does not list", typ)
		}
	}
}

// checkExample decodes a documented event strictly and checks it against its entry.
func checkExample(e events.PublishedEvent, ex []byte) error {
	ev, err := events.Decode(ex)
	if err != nil {
		return err
	}
	switch {
	case ev.Type != e.Type():
		return fmt.Errorf("type %q", ev.Type)
	case !e.PublishedBy(strings.TrimPrefix(ev.Source, "/hostplane/")):
		return fmt.Errorf("source %q, want /hostplane/<one of %v>", ev.Source, e.Publishers)
	case ev.Time.IsZero() || ev.Subject == "":
		return fmt.Errorf("no time or subject")
	case e.Key == "<cluster>" && strings.Contains(ev.Subject, "/"),
		e.Key == "<cluster>/<component>" && !strings.Contains(ev.Subject, "/"):
		return fmt.Errorf("subject %q is not a %s", ev.Subject, e.Key)
	}
	typ := eventData[e.Type()]
	switch {
	case (e.Data == "") != (len(ev.Data) == 0):
		return fmt.Errorf("data %q, but events.Published says %q", ev.Data, e.Data)
	case typ == nil && len(ev.Data) > 0:
		return fmt.Errorf("the test knows no Go type for this data")
	case typ != nil:
		dec := json.NewDecoder(bytes.NewReader(ev.Data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(reflect.New(typ).Interface()); err != nil {
			return fmt.Errorf("data does not decode into %s: %w", typ, err)
		}
		if ev.DataContentType != "application/json" {
			return fmt.Errorf("datacontenttype %q", ev.DataContentType)
		}
	}
	return nil
}
