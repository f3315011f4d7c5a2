// Package browsertest starts a headless Chromium for the dashboard's
// browser tests (chromedp). A missing Chromium skips the test, unless
// CI=true, where it fails it.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds Chromium: $DAGFLOW_CHROMIUM, then the usual names.
func chromiumPath() string {
	if p := os.Getenv("DAGFLOW_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Timeout bounds a browser test's steps: generous, for a loaded 2-core
// machine.
const Timeout = 90 * time.Second

// New starts a headless Chromium with a fresh profile and returns a
// context of its first tab; both end with the test.
func New(t testing.TB) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("browsertest: no Chromium found (Debian's chromium package; or set DAGFLOW_CHROMIUM): CI must run the browser tests")
		}
		t.Skip("browsertest: no Chromium found (install Debian's chromium, or set DAGFLOW_CHROMIUM)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			if cmd.SysProcAttr == nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{}
			}
			cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		}),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	// The first call starts the browser: no timeout on its context (it
	// would stop the browser), but the tab must answer.
	if err := chromedp.Do(bctx); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browsertest: starting %s: %v", path, err)
		}
		t.Skipf("browsertest: starting %s: %v", path, err)
	}
	return bctx
}

// Tab opens another tab of the browser of ctx.
func Tab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("browsertest: new tab: %v", err)
	}
	return tab
}

// Do runs actions within Timeout, failing the test with what on error.
func Do(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("browser: evaluate %s: %v", expr, err)
	}
	return v
}

// EvalAwait evaluates a JavaScript expression that gives a promise, and
// returns what the promise resolves to.
func EvalAwait[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("browser: evaluate %s: %v", expr, err)
	}
	return v
}

// WaitJS waits until the JavaScript expression cond is truthy, asking
// the page every 50 ms (a navigation in between, such as a form's
// redirect, is waited out), failing the test after Timeout.
func WaitJS(t testing.TB, ctx context.Context, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	var last error
	for time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("browser: wait for %s: %v", what, ctx.Err())
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("browser: %s: not true within %v (%s); last error: %v", what, Timeout, cond, last)
}

// DarkMode makes the tab prefer a dark color scheme (dark true) or
// light.
func DarkMode(t testing.TB, ctx context.Context, dark bool) {
	t.Helper()
	v := "light"
	if dark {
		v = "dark"
	}
	Do(t, ctx, "color scheme "+v, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}},
		})
		return err
	}))
}

// ScreenshotDir is where screenshots go: $DAGFLOW_SCREENSHOT_DIR when
// set, else the test's artifact directory (go test -artifacts keeps it).
func ScreenshotDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("DAGFLOW_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

// Screenshot writes a full-page PNG of the tab, width px wide, to
// ScreenshotDir/name.png and returns its path.
func Screenshot(t *testing.T, ctx context.Context, name string, width int64) string {
	t.Helper()
	Do(t, ctx, "viewport for "+name, chromedp.EmulateViewport(width, 900))
	c, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot %s: %v", name, err)
	}
	p := filepath.Join(ScreenshotDir(t), strings.ReplaceAll(name, "/", "_")+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", p, len(png))
	return p
}

// ScreenshotElement writes a PNG of the first element matching the CSS
// selector to ScreenshotDir/name.png and returns its path.
func ScreenshotElement(t *testing.T, ctx context.Context, name, selector string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.Screenshot(selector, chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("browser: screenshot %s of %s: %v", name, selector, err)
	}
	p := filepath.Join(ScreenshotDir(t), strings.ReplaceAll(name, "/", "_")+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", p, len(png))
	return p
}
