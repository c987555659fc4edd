package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's Chromium, headless, through the
// DevTools protocol (chromedp), against a real tockd: the harness below
// starts one browser per test, fails the test on any script error or
// Content-Security-Policy violation the page reports, and saves a
// screenshot of a failed test's page in ui/testdata/failures/.

// chromium is the browser's path: $TOCK_CHROMIUM, or chromium on $PATH
// (make test installs Debian's when it is missing).
func chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TOCK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: install Debian's chromium (make test does, with scripts/ensure-ui.sh) or set TOCK_CHROMIUM")
	return ""
}

// browser is one headless Chromium and its one tab.
type browser struct {
	t    testing.TB
	ctx  context.Context
	base string
	mu   sync.Mutex
	// problems are the script errors and CSP violations the page reported.
	problems []string
}

// newBrowser starts Chromium for the test, its pages at base (a tockd's
// URL). It is closed at cleanup, after a screenshot if the test failed.
func newBrowser(t testing.TB, base string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		// This machine's network is closed: Chromium's own connections
		// (updates, sync, field trials) would be refused, many at a time.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, base: base}
	err := chromedp.Listen(ctx, func(ev any) {
		if ev, ok := ev.(*runtime.EventExceptionThrown); ok {
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.problem(fmt.Sprintf("a script error: %s at %s:%d", msg, d.URL, d.LineNumber))
		}
	})
	if err == nil {
		// Before any script of every page: collect Content-Security-Policy
		// violations, and accept confirmations (pause every job matching,
		// delete) as the user would.
		_, err = chromedp.Run(ctx, chromedp.Action[page.AddScriptToEvaluateOnNewDocumentResult](
			func(ctx context.Context, tg *chromedp.Target) (page.AddScriptToEvaluateOnNewDocumentResult, error) {
				return cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
					Source: `window.__violations = [];
document.addEventListener("securitypolicyviolation", e => window.__violations.push(e.violatedDirective + " refused " + e.blockedURI));
window.confirm = () => true;`})
			}))
	}
	if err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot(filepath.Join("testdata", "failures", safeName(t.Name())+".png"))
		}
		cancelTab()
		cancelAlloc()
	})
	return b
}

func safeName(s string) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(s)
}

func (b *browser) problem(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// checkClean fails the test if the page reported a script error since the
// browser started, or a CSP violation since it was loaded.
func (b *browser) checkClean() {
	b.t.Helper()
	var violations []string
	if err := b.eval(`window.__violations || []`, &violations); err != nil {
		b.t.Errorf("read CSP violations: %v", err)
	}
	for _, v := range violations {
		b.t.Errorf("Content-Security-Policy violation: %s", v)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("the page reported %s", p)
	}
	b.problems = nil
}

// step runs one step of a test whose steps build on each other: the
// first to fail ends the test, with a screenshot of its page in
// testdata/failures.
func (b *browser) step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		b.t = t
		b.screenshot(filepath.Join("testdata", "failures", safeName(t.Name()+"/"+name)+".png"))
		t.FailNow()
	}
}

// shot saves the page as name.png in $TOCK_UI_SCREENSHOTS when it is set
// (the pictures of docs/dashboard.md).
func (b *browser) shot(name string) {
	if dir := os.Getenv("TOCK_UI_SCREENSHOTS"); dir != "" {
		b.screenshot(filepath.Join(dir, name+".png"))
	}
}

// screenshot saves the whole page as a PNG at path.
func (b *browser) screenshot(path string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot: %v", err)
		return
	}
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot: %v", err)
		return
	}
	abs, _ := filepath.Abs(path)
	b.t.Logf("screenshot of the page: %s", abs)
}

// run runs actions with a bound, failing the test on an error.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// open loads the dashboard's page at path (below /ui) in the tab.
func (b *browser) open(path string) {
	b.t.Helper()
	var first bool
	if err := b.eval(`location.protocol === "about:"`, &first); err != nil || first {
		b.run("open "+path, chromedp.Navigate(b.base+"/ui"+path))
	} else if err := b.eval(fmt.Sprintf(`location.assign(%q)`, b.base+"/ui"+path), nil); err != nil {
		b.t.Fatalf("open %s: %v", path, err)
	}
	b.waitFor("the page "+path, fmt.Sprintf(`location.pathname + location.search === %q && document.readyState === "complete" && document.querySelector("#app main")`, "/ui"+path), 15*time.Second)
}

// eval evaluates a JavaScript expression in the page into out (JSON
// decoded; nil to drop it).
func (b *browser) eval(js string, out any) error {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string]("JSON.stringify(("+js+") ?? null)"))
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal([]byte(raw), out)
}

// waitFor waits until the JavaScript expression js is true in the page.
func (b *browser) waitFor(what, js string, within time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		var ok bool
		if last = b.eval("!!("+js+")", &ok); last == nil && ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	var requests []string
	_ = b.eval(`performance.getEntriesByType("resource").map(e => e.name + (e.responseEnd ? " " + Math.round(e.duration) + " ms" : " (no answer yet)"))`, &requests)
	var probe string
	ctx, cancel := context.WithTimeout(b.ctx, 8*time.Second)
	probe, perr := chromedp.Run(ctx, chromedp.Evaluate[string](`Promise.race([fetch("/healthz").then(r => "healthz " + r.status), new Promise(r => setTimeout(() => r("healthz: no answer in 5 s"), 5000))])`, chromedp.EvalAwaitPromise))
	cancel()
	b.t.Logf("can the page still reach the server? %s %v", probe, perr)
	b.mu.Lock()
	problems := strings.Join(b.problems, "\n")
	b.mu.Unlock()
	b.t.Fatalf("waited %s for %s (%s): not so; last error %v; the page says:\n%s\nits requests:\n%s\nit reported:\n%s", within, what, js, last,
		b.text("main"), strings.Join(requests, "\n"), problems)
}

// text is the visible text of the first element matching css.
func (b *browser) text(css string) string {
	var s string
	_ = b.eval(fmt.Sprintf(`(document.querySelector(%q)||{}).innerText||""`, css), &s)
	return s
}

// waitText waits until the element matching css shows text.
func (b *browser) waitText(css, text string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("%q in %s", text, css),
		fmt.Sprintf(`((document.querySelector(%q)||{}).innerText||"").includes(%q)`, css, text), 15*time.Second)
}

// has says whether an element matches css now.
func (b *browser) has(css string) bool {
	var ok bool
	_ = b.eval(fmt.Sprintf(`!!document.querySelector(%q)`, css), &ok)
	return ok
}

// buttonByText is the CSS-free way to find a button: a JS expression for
// the first button (or link styled as one) whose text is label.
func buttonByText(label string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("button, a.button")].find(e => e.innerText.trim() === %q)`, label)
}

// offers says whether the page shows a button (or link) whose text is label.
func (b *browser) offers(label string) bool {
	var found bool
	_ = b.eval("!!"+buttonByText(label), &found)
	return found
}

// click clicks the button (or link) whose text is label.
func (b *browser) click(label string) {
	b.t.Helper()
	b.waitFor("a button "+label, buttonByText(label)+` && !`+buttonByText(label)+`.disabled`, 15*time.Second)
	if err := b.eval(buttonByText(label)+`.click()`, nil); err != nil && !strings.Contains(err.Error(), "undefined") {
		b.t.Fatalf("click %s: %v", label, err)
	}
}

// fill sets the form control #id to value as a user's typing would.
func (b *browser) fill(id, value string) {
	b.t.Helper()
	sel := "#" + strings.ReplaceAll(id, ".", `\.`)
	b.run("find "+id, chromedp.WaitVisible(chromedp.CSS(sel)))
	if err := b.eval(fmt.Sprintf(`(e => { e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true})); })(document.querySelector(%q))`, sel), nil); err != nil {
		b.t.Fatalf("clear %s: %v", id, err)
	}
	b.run("type into "+id, chromedp.SendKeys(chromedp.CSS(sel), value))
}

// choose selects value in the <select> #id.
func (b *browser) choose(id, value string) {
	b.t.Helper()
	sel := "#" + strings.ReplaceAll(id, ".", `\.`)
	b.run("choose "+id, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.SetValue(chromedp.CSS(sel), value))
	// SetValue does not fire change: the app listens for it.
	if err := b.eval(fmt.Sprintf(`document.querySelector(%q).dispatchEvent(new Event("change", {bubbles: true}))`, sel), nil); err != nil {
		b.t.Fatalf("choose %s: %v", id, err)
	}
}

// axeResult is what axe-core reports of a page.
type axeResult struct {
	Violations []struct {
		ID     string `json:"id"`
		Impact string `json:"impact"`
		Help   string `json:"help"`
		Nodes  []struct {
			Target []any `json:"target"`
		} `json:"nodes"`
	} `json:"violations"`
}

var (
	axeOnce   sync.Once
	axeSource string
	axeErr    error
)

// axe checks the page with axe-core (from ui/node_modules, which make
// test installs) and fails the test on a critical or serious violation.
func (b *browser) axe(page string) {
	b.t.Helper()
	axeOnce.Do(func() {
		var src []byte
		src, axeErr = os.ReadFile(filepath.Join("node_modules", "axe-core", "axe.min.js"))
		axeSource = string(src)
	})
	if axeErr != nil {
		b.t.Fatalf("axe-core: %v (make test installs it: scripts/ensure-ui.sh)", axeErr)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	// axe is evaluated through the DevTools protocol, not a <script>: the
	// page's CSP (script-src 'self') rightly refuses injected scripts.
	_, err := chromedp.Run(ctx, chromedp.Evaluate[int](axeSource+";0"))
	var raw string
	if err == nil {
		raw, err = chromedp.Run(ctx, chromedp.Evaluate[string](
			`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r))`, chromedp.EvalAwaitPromise))
	}
	if err != nil {
		b.t.Fatalf("axe on %s: %v", page, err)
	}
	var res axeResult
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		b.t.Fatalf("axe on %s: %v", page, err)
	}
	for _, v := range res.Violations {
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprint(n.Target...))
		}
		msg := fmt.Sprintf("%s: %s (%s) %s at %s", page, v.ID, v.Impact, v.Help, strings.Join(where, ", "))
		if v.Impact == "critical" || v.Impact == "serious" {
			b.t.Error("accessibility: " + msg)
		} else {
			b.t.Log("accessibility (minor): " + msg)
		}
	}
}
