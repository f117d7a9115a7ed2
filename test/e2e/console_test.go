package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/release"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// envChromium names the Chromium (or Chrome) executable the console test drives; empty: the
// first of chromium, chromium-browser, google-chrome on PATH.
const envChromium = "HOSTPLANE_CHROMIUM"

// envScreenshots is the directory the console test writes its screenshots to (the committed
// ones are in docs/console: HOSTPLANE_CONSOLE_SCREENSHOTS=$PWD/docs/console regenerates
// them); empty: the test's temporary directory.
const envScreenshots = "HOSTPLANE_CONSOLE_SCREENSHOTS"

// The web console (/ui) drives a cluster's life through the page in headless Chromium, as a
// person would: sign in with the admin token, see the API's field error next to the name
// field, create a cluster and watch it become Available, be refused a downgrade (the field
// error beside the release), create a node pool and scale it (again with a field error for a
// bad size), download the kubeconfig, delete the cluster and see it gone. Any error in
// the browser's console or an uncaught exception fails the test.
func TestConsole_DrivesAClusterFromCreateToDeleteWithoutBrowserErrors(t *testing.T) {
	testenv.RequireBinaries(t, release.Latest(), release.Components()...)
	chromium := chromiumPath(t)
	const grafana = "http://grafana.example:3000"
	s, c := startStackAt(t, t.TempDir(), func(cfg *dev.Config) { cfg.GrafanaURL = grafana })
	t.Cleanup(func() { s.Stop(context.Background()) })
	p := openBrowser(t, chromium)
	const cl, pool = "demo", "workers"

	// /ui needs no token; the API it calls does.
	p.run("open the console", chromedp.Navigate(s.URL()+"/ui/"))
	p.waitFor("the sign-in form", 30*time.Second, `!document.querySelector('#view-signin').hidden`)
	p.screenshot("signin")
	p.run("sign in",
		setValue("#signin-token", s.AdminToken()),
		click(`#signin-form button[type=submit]`))
	p.waitFor("the fleet page with the releases", 30*time.Second,
		`!document.querySelector('#view-fleet').hidden && document.querySelectorAll('#create-cluster-release option').length > 0`)
	if href := p.attr("#grafana-fleet", "href"); !strings.HasPrefix(href, grafana+"/d/hostplane-fleet-overview") {
		t.Errorf("the fleet's Grafana link is %q, want one into %s/d/hostplane-fleet-overview", href, grafana)
	}

	// The API's validation error lands next to the field it names.
	p.run("create a cluster with a bad name",
		setValue("#create-cluster-name", "Bad_Name"),
		click(`#create-cluster button[type=submit]`))
	p.waitFor("the name's field error", 30*time.Second,
		`document.querySelector('#create-cluster [data-error-for="name"]').textContent.startsWith('name: ')`)
	if got := p.attr("#create-cluster-name", "aria-invalid"); got != "true" {
		t.Errorf("the name field is not marked invalid (aria-invalid=%q)", got)
	}
	p.screenshot("field-error")

	p.run("create the cluster",
		setValue("#create-cluster-name", cl),
		click(`#create-cluster button[type=submit]`))
	p.waitFor("the cluster's page", 30*time.Second, `location.hash === '#/clusters/`+cl+`' && !document.querySelector('#view-cluster').hidden`)
	p.waitFor("the cluster Available on its page", available,
		`document.querySelector('#cluster-available [data-status="True"]') !== null`)
	p.waitFor("the components and the certificates", time.Minute,
		`document.querySelectorAll('#components tbody tr').length >= 4 && document.querySelectorAll('#certificates tbody tr').length > 0`)
	// The upgrade form sends the PATCH; a downgrade comes back as a field error beside it.
	if older := olderRelease(); older != "" {
		p.run("downgrade the cluster",
			setValue("#upgrade-cluster-release", older),
			click(`#upgrade-cluster button[type=submit]`))
		p.waitFor("the release's field error", 30*time.Second,
			`document.querySelector('#upgrade-cluster [data-error-for="spec.release.version"]').textContent.includes('cannot downgrade')`)
	}
	if href := p.attr("#grafana-cluster a", "href"); !strings.Contains(href, "/d/hostplane-cluster-detail?var-cluster="+cl) {
		t.Errorf("the cluster's Grafana link is %q", href)
	}

	p.run("create a node pool of none",
		setValue("#create-nodepool-name", pool),
		setValue("#create-nodepool-replicas", "0"),
		click(`#create-nodepool button[type=submit]`))
	row := `#nodepools tr[data-nodepool="` + pool + `"]`
	p.waitFor("the pool's row", time.Minute, `document.querySelector('`+row+`') !== null`)
	p.run("scale the pool to -1",
		setValue(row+" input.replicas", "-1"),
		click(row+` form.scale button[type=submit]`))
	p.waitFor("the size's field error", 30*time.Second,
		`document.querySelector('`+row+` [data-error-for="spec.replicas"]').textContent.includes('must not be negative')`)
	p.run("scale the pool to 1",
		setValue(row+" input.replicas", "1"),
		click(row+` form.scale button[type=submit]`))
	p.waitFor("the pool 1/1 ready and its machine running", poolReady,
		`(() => { const r = document.querySelector('`+row+` .ready');
		  return r && r.dataset.ready === '1' && r.dataset.desired === '1' &&
		    document.querySelector('`+row+` [data-type="AllMachinesReady"][data-status="True"]') !== null &&
		    document.querySelector('#machines tr[data-phase="Running"]') !== null; })()`)
	if got := p.text(row + ` [data-error-for="spec.replicas"]`); got != "" {
		t.Errorf("the field error stayed after a good size: %q", got)
	}
	p.waitFor("events in the live feed", time.Minute, `document.querySelectorAll('#events li').length > 0`)
	p.run("download the kubeconfig", click("#download-kubeconfig"))
	kubeconfig := p.download(cl+".kubeconfig", 30*time.Second)
	if !strings.Contains(kubeconfig, "apiVersion: v1") || !strings.Contains(kubeconfig, "kind: Config") {
		t.Errorf("the downloaded kubeconfig is not one:\n%s", kubeconfig)
	}
	p.scrollTo("header")
	p.screenshot("cluster")
	p.scrollTo("#components")
	p.screenshot("cluster-nodepools")
	p.scrollTo("#pki-summary")
	p.screenshot("cluster-pki-events")
	p.scrollTo("header")

	p.run("go to the fleet", chromedp.Navigate(s.URL()+"/ui/#/"))
	p.waitFor("the cluster Available in the fleet", 30*time.Second,
		`document.querySelector('#clusters tr[data-cluster="`+cl+`"] .available [data-status="True"]') !== null`)
	p.screenshot("fleet")

	p.run("open the cluster", click(`#clusters tr[data-cluster="`+cl+`"] a`))
	p.waitFor("the cluster's page shown again", 30*time.Second,
		`location.hash === '#/clusters/`+cl+`' && document.querySelectorAll('#cluster-conditions tbody tr').length > 0`)
	p.run("delete the cluster",
		click("#delete-cluster-button"),
		waitVisible("#delete-cluster-confirm"),
		click("#delete-cluster-confirm"))
	p.waitFor("the fleet page after the delete", 30*time.Second, `location.hash === '#/' && !document.querySelector('#view-fleet').hidden`)
	p.waitFor("the cluster gone from the fleet", available,
		`document.querySelector('#clusters tr[data-cluster="`+cl+`"]') === null && document.querySelector('#clusters tbody') !== null &&
		 document.querySelector('#fleet-error').textContent === ''`)
	if _, code := c.cluster(cl); code != http.StatusNotFound {
		t.Errorf("GET the deleted cluster answered %d, want 404", code)
	}
	p.checkConsole()
}

// olderRelease is a release older than the latest, or "" when there is none.
func olderRelease() string {
	for _, v := range release.Versions() {
		if v != release.Latest().Version {
			return v
		}
	}
	return ""
}

// chromiumPath finds the browser, or fails saying how to install it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("no chromium on PATH: run make chromium-tools (tools/chromium.sh installs Debian's chromium), or set %s", envChromium)
	return ""
}

// setValue sets the value of the input sel selects.
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS(sel), v)
}

// waitVisible waits until the element sel selects is shown.
func waitVisible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

// click clicks the element sel selects as the page's own script would (element.click()): a
// mouse event at coordinates could land beside a button that a refresh just moved.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		found, err := chromedp.Evaluate[bool](`((e) => { if (!e) return false; e.click(); return true; })(document.querySelector(`+strconv.Quote(sel)+`))`)(ctx, t)
		if err == nil && !found {
			err = fmt.Errorf("no element %s to click", sel)
		}
		return err
	})
}

// browserPage is one headless Chromium tab and what its console said.
type browserPage struct {
	t         *testing.T
	ctx       context.Context
	dir       string // screenshots
	downloads string // where the browser saves downloads

	mu     sync.Mutex
	errors []string
}

// openBrowser starts headless Chromium (as root here, hence no sandbox) with its profile in
// a temporary directory; the test's cleanup kills it.
func openBrowser(t *testing.T, chromium string) *browserPage {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-gpu", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	p := &browserPage{t: t, ctx: ctx, dir: os.Getenv(envScreenshots)}
	if p.dir == "" {
		p.dir = t.TempDir()
	}
	// The first run starts the browser; it must not have a deadline (that would stop it).
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start %s: %v", chromium, err)
	}
	p.downloads = t.TempDir()
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: p.downloads,
	}); err != nil {
		t.Fatalf("allow downloads: %v", err)
	}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			p.record(m)
		}
	}()
	t.Cleanup(func() {
		cancel()      // closes the tab and the browser
		cancelAlloc() // and waits for the process to end
		<-done
	})
	return p
}

// record keeps uncaught exceptions, console.error/assert calls and the browser's own error
// log entries. The one kind allowed is a network entry for an answer of 400 or 404: the page
// asks for those on purpose (a field error; a cluster that is gone, PKI not issued yet) and
// Chromium logs every HTTP error answer.
func (p *browserPage) record(m chromedp.ConsoleMessage) {
	switch {
	case m.IsException(), m.Type == chromedp.ConsoleError, m.Type == "assert":
	default:
		return
	}
	if m.Source == "network" && (strings.Contains(m.Text, "status of 400") || strings.Contains(m.Text, "status of 404")) {
		return
	}
	msg := m.String()
	if m.Source != "" {
		msg += " (" + m.Source + ")"
	}
	if m.URL != "" {
		msg += fmt.Sprintf(" at %s:%d", m.URL, m.Line+1)
	}
	p.mu.Lock()
	p.errors = append(p.errors, msg)
	p.mu.Unlock()
}

// checkConsole fails the test if the browser reported an error.
func (p *browserPage) checkConsole() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errors) > 0 {
		p.t.Fatalf("the browser reported errors:\n  %s", strings.Join(p.errors, "\n  "))
	}
}

// run runs steps in the tab, bounded.
func (p *browserPage) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v\npage: %s", what, err, p.mainText())
	}
	p.checkConsole()
}

// waitFor polls a JavaScript expression until it is true, failing after timeout with what
// the page shows.
func (p *browserPage) waitFor(what string, timeout time.Duration, expr string) {
	p.t.Helper()
	start := time.Now()
	var last error // of the latest evaluation: a page between two renders may have no answer yet
	err := wait.PollUntilContextTimeout(p.ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		defer cancel()
		var ok bool
		ok, last = chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		return ok && last == nil, nil
	})
	if err != nil {
		p.t.Fatalf("%s: not seen within %v (%v; last evaluation: %v)\npage: %s", what, timeout, err, last, p.mainText())
	}
	p.t.Logf("console: %s (%.1fs)", what, time.Since(start).Seconds())
	p.checkConsole()
}

// text is the text of the element sel selects ("" when there is none).
func (p *browserPage) text(sel string) string {
	return p.evaluate(`(document.querySelector(` + strconv.Quote(sel) + `) || {}).textContent || ''`)
}

// download waits for the browser to have saved a download called name, and returns it.
func (p *browserPage) download(name string, timeout time.Duration) string {
	p.t.Helper()
	var b []byte
	err := wait.PollUntilContextTimeout(p.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		b, err = os.ReadFile(filepath.Join(p.downloads, name)) // Chromium renames it there when complete
		return err == nil && len(b) > 0, nil
	})
	if err != nil {
		entries, _ := os.ReadDir(p.downloads)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		p.t.Fatalf("no download %s within %v (the directory holds %v)\npage: %s", name, timeout, names, p.mainText())
	}
	p.checkConsole()
	return string(b)
}

// scrollTo scrolls the element sel selects, with its heading, to the top of the window.
func (p *browserPage) scrollTo(sel string) {
	p.t.Helper()
	p.evaluate(`((e) => { const h = e.previousElementSibling;
	  (h && h.tagName === 'H2' ? h : e).scrollIntoView({block: 'start'}); return ''; })(document.querySelector(` + strconv.Quote(sel) + `))`)
}

// attr is the attribute of the element sel selects ("" when either is missing).
func (p *browserPage) attr(sel, name string) string {
	return p.evaluate(`((e) => (e && e.getAttribute(` + strconv.Quote(name) + `)) || '')(document.querySelector(` + strconv.Quote(sel) + `))`)
}

func (p *browserPage) evaluate(expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// mainText is what the page shows, for failure messages.
func (p *browserPage) mainText() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + '\n' + document.querySelector('main').innerText`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if len(s) > 4000 {
		s = s[:4000] + "…"
	}
	return s
}

// screenshot saves the viewport (1280×800) as <dir>/<name>.png.
func (p *browserPage) screenshot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(p.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("console: screenshot %s (%d bytes)", path, len(png))
}
