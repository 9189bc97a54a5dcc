package tests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/baton-cron/baton/emulator/stack"
)

// chromiumPath finds the browser the console test drives: BATON_CHROMIUM,
// else Debian's /usr/bin/chromium, else chromium on PATH; "" when none.
func chromiumPath() string {
	if p := os.Getenv("BATON_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// screenshotDir is where the test writes its PNGs: BATON_SCREENSHOTS
// (relative to the repository root, as `make screenshots` passes
// docs/console) or a temporary directory.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("BATON_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", dir) // go test runs in tests/
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshots: %v", err)
	}
	return dir
}

// TestConsoleBrowser drives the operator console of a real local stack
// (database, bucket, task queue, GPU worker) in headless Chromium, as
// issue #14's acceptance asks: schedules created through the API are
// listed, one shows its upcoming fire times and is paused from its page,
// the runs page filtered by failed shows the failing run's error, and a
// failed GPU job's page shows its stderr. Every page is saved as a PNG.
func TestConsoleBrowser(t *testing.T) {
	browser := chromiumPath()
	if browser == "" {
		if os.Getenv("BATON_REQUIRE_BROWSER") == "1" {
			t.Fatal("BATON_REQUIRE_BROWSER=1 but no chromium: set BATON_CHROMIUM or install Debian's chromium package")
		}
		t.Skip("no chromium (BATON_CHROMIUM, /usr/bin/chromium or chromium on PATH): install Debian's chromium to run the console browser test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1, GPUWorkers: 1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()

	api := func(method, path, body string, out any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, s.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.Token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		if res.StatusCode/100 != 2 {
			var e any
			_ = json.NewDecoder(res.Body).Decode(&e)
			t.Fatalf("%s %s: HTTP %d %v", method, path, res.StatusCode, e)
		}
		if out != nil {
			if err := json.NewDecoder(res.Body).Decode(out); err != nil {
				t.Fatalf("%s %s: decode: %v", method, path, err)
			}
		}
	}
	// Two schedules through the API, as `baton schedules create --builtin`
	// sends them; Berlin's zone so the fire times carry an offset.
	api("POST", "/Schedules/schedules", `{"id":"nightly-report","cron":"30 2 * * *","timeZone":"Europe/Berlin","target":{"type":"builtin","builtin":{"name":"noop"}}}`, nil)
	api("POST", "/Schedules/schedules", `{"id":"flaky-export","cron":"*/15 * * * *","target":{"type":"builtin","builtin":{"name":"fail","args":{"message":"export bucket unreachable"}}}}`, nil)
	api("POST", "/Schedules/schedules/nightly-report:trigger", "", nil)
	api("POST", "/Schedules/schedules/flaky-export:trigger", "", nil)
	// A gpu-target schedule: its run hands its work to a GPU job, and the
	// run's page links to it.
	api("POST", "/Schedules/schedules", `{"id":"gpu-train","cron":"0 4 * * 1","target":{"type":"gpu","gpu":{"payload":"echo trained","maxAttempts":1}}}`, nil)
	api("POST", "/Schedules/schedules/gpu-train:trigger", "", nil)
	// A GPU job that writes to stderr and fails.
	var job struct{ ID, Status string }
	api("POST", "/GPU/gpu/jobs", `{"payload":"echo working; echo boom from the GPU job >&2; exit 3","maxAttempts":1}`, &job)

	// Wait for the outcomes the pages are to show.
	waitFor(t, ctx, "the failing run", func() bool {
		var page struct {
			Runs []struct{ ScheduleID, Error string }
		}
		api("GET", "/Schedules/runs?status=failed", "", &page)
		return len(page.Runs) > 0 && page.Runs[0].Error != ""
	})
	waitFor(t, ctx, "the GPU job to fail", func() bool {
		api("GET", "/GPU/gpu/jobs/"+job.ID, "", &job)
		return job.Status == "failed"
	})
	waitFor(t, ctx, "the noop run", func() bool {
		var page struct{ Runs []struct{ Status string } }
		api("GET", "/Schedules/runs?status=succeeded&schedule=nightly-report", "", &page)
		return len(page.Runs) > 0
	})

	var gpuRun struct{ ID, GPUJob string }
	waitFor(t, ctx, "the gpu-target run's job", func() bool {
		var page struct{ Runs []struct{ ID, GPUJob string } }
		api("GET", "/Schedules/runs?schedule=gpu-train", "", &page)
		if len(page.Runs) > 0 && page.Runs[0].GPUJob != "" {
			gpuRun = page.Runs[0]
			return true
		}
		return false
	})

	shots := screenshotDir(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	base := s.URL + "/console"
	// The first Run allocates the browser and must not carry a timeout
	// (chromedp stops the browser with that context); each step below gets
	// its own deadline.
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start chromium %s: %v", browser, err)
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, scancel := context.WithTimeout(bctx, 30*time.Second)
		defer scancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	text := func(step, sel string) string {
		t.Helper()
		run(step, chromedp.WaitVisible(chromedp.CSS(sel)))
		sctx, scancel := context.WithTimeout(bctx, 30*time.Second)
		defer scancel()
		v, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return v
	}
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	// The schedules page lists both.
	run("open the console", chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(css("main table")))
	list := text("schedules list", "main")
	for _, want := range []string{"nightly-report", "flaky-export", "Europe/Berlin", "enabled"} {
		if !strings.Contains(list, want) {
			t.Errorf("schedules page lacks %q:\n%s", want, list)
		}
	}
	run("screenshot schedules", shot("schedules"))

	// One schedule shows its next ten fire times, at 02:30 Berlin time.
	run("open nightly-report", chromedp.Click(css(`a[href$="/schedules/nightly-report"]`)), chromedp.WaitVisible(css("#fire-times li")))
	sctx, scancel := context.WithTimeout(bctx, 30*time.Second)
	fireTimes, err := chromedp.Run(sctx, chromedp.Evaluate[int](`document.querySelectorAll("#fire-times li").length`))
	scancel()
	if err != nil {
		t.Fatalf("count fire times: %v", err)
	}
	if fireTimes != 10 {
		t.Errorf("schedule page shows %d fire times, want 10", fireTimes)
	}
	if ft := text("fire times", "#fire-times"); !strings.Contains(ft, "02:30:00 +0") {
		t.Errorf("fire times do not show 02:30 in Berlin:\n%s", ft)
	}
	if st := text("state", "#state"); st != "enabled" {
		t.Errorf("state before pause = %q, want enabled", st)
	}
	run("screenshot schedule", shot("schedule"))

	// Pause with a reason from the page: the POST redirects back with the
	// new state and the reason.
	run("pause", chromedp.SendKeys(css("#pause-reason"), "waiting for the warehouse migration"),
		chromedp.Click(css(`form[action$="/pause"] button`)), chromedp.WaitVisible(css(`form[action$="/resume"]`)))
	if rs := text("pause reason", "#pause-reason-text"); rs != "waiting for the warehouse migration" {
		t.Errorf("pause reason shown = %q", rs)
	}
	if st := text("state after pause", "#state"); st != "paused" {
		t.Errorf("state after pause = %q, want paused", st)
	}
	if fl := text("flash", ".flash"); !strings.Contains(fl, "Paused nightly-report") {
		t.Errorf("flash after pause = %q", fl)
	}
	var sc struct {
		Enabled     bool
		PauseReason string
	}
	api("GET", "/Schedules/schedules/nightly-report", "", &sc)
	if sc.Enabled || sc.PauseReason != "waiting for the warehouse migration" {
		t.Errorf("the API has nightly-report enabled=%v reason %q after the console paused it", sc.Enabled, sc.PauseReason)
	}
	run("screenshot paused", shot("schedule-paused"))

	// Runs filtered by failed show the failing run's error.
	run("runs page", chromedp.Navigate(base+"/runs"), chromedp.WaitVisible(css("#f-status")),
		chromedp.SetValue(css("#f-status"), "failed"), chromedp.Submit(css("#f-status")),
		chromedp.WaitVisible(css(`a[href*="/runs/flaky-export"]`)))
	runsText := text("runs", "main table")
	if !strings.Contains(runsText, "export bucket unreachable") {
		t.Errorf("failed runs page lacks the run's error:\n%s", runsText)
	}
	if strings.Contains(runsText, "nightly-report") {
		t.Errorf("failed runs page shows the succeeded nightly-report run:\n%s", runsText)
	}
	run("screenshot runs", shot("runs-failed"))
	run("open the failed run", chromedp.Click(css(`a[href*="/runs/flaky-export"]`)), chromedp.WaitVisible(css("#run-error")))
	if e := text("run error", "#run-error"); !strings.Contains(e, "export bucket unreachable") {
		t.Errorf("run page error = %q", e)
	}
	run("screenshot run", shot("run"))

	// A gpu-target run links to its GPU job.
	run("gpu run page", chromedp.Navigate(base+"/runs/"+gpuRun.ID), chromedp.WaitVisible(css(`a[href$="/gpu/jobs/`+gpuRun.GPUJob+`"]`)))

	// The GPU page lists the job; its page shows its stderr.
	run("gpu page", chromedp.Navigate(base+"/gpu"), chromedp.WaitVisible(css(`a[href$="/gpu/jobs/`+job.ID+`"]`)))
	// The tenants table shows fair share's numbers: the default tenant's
	// jobs ran, so it has usage (decayed slot-seconds) above zero.
	if u := text("default tenant's usage", "#tenants-h ~ table td.usage"); u == "" || u == "0.0 s" {
		t.Errorf("the GPU page shows the default tenant's usage as %q; want the slot-seconds its jobs held", u)
	}
	run("screenshot gpu", shot("gpu"))
	run("open the job", chromedp.Click(css(`main table a[href$="/gpu/jobs/`+job.ID+`"]`)), chromedp.WaitVisible(css("#log-stderr")))
	if e := text("stderr", "#log-stderr"); !strings.Contains(e, "boom from the GPU job") {
		t.Errorf("job page stderr = %q, want the job's stderr", e)
	}
	if o := text("stdout", "#log-stdout"); !strings.Contains(o, "working") {
		t.Errorf("job page stdout = %q", o)
	}
	run("screenshot job", shot("gpu-job"))

	run("leases page", chromedp.Navigate(base+"/leases"), chromedp.WaitVisible(css("main table")))
	if l := text("leases", "main"); strings.Contains(l, "Could not list leases") {
		t.Errorf("leases page: %s", l)
	}
	run("screenshot leases", shot("leases"))
	// Live updates: with the schedules page open, a resume through the API
	// shows up without a reload (the script polls and swaps <main>).
	run("schedules again", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("main table")))
	if l := text("paused in the list", "main"); !strings.Contains(l, "waiting for the warehouse migration") {
		t.Fatalf("schedules page does not show the pause reason:\n%s", l)
	}
	api("POST", "/Schedules/schedules/nightly-report:resume", "", nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		sctx, scancel := context.WithTimeout(bctx, 10*time.Second)
		still, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`document.querySelector("main").textContent.includes("waiting for the warehouse migration")`))
		scancel()
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		if !still {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the schedules page still shows nightly-report paused 30s after it was resumed: live updates do not refresh it")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ls := text("live state", "#live-state"); !strings.Contains(ls, "Live") {
		t.Errorf("live state line = %q", ls)
	}
	t.Logf("screenshots in %s", shots)
}

// TestConsoleRefusals checks the console's protections on the real stack:
// a cross-site POST is refused before it reaches the API, a foreign Host
// (DNS rebinding) is refused, the answers carry a self-only CSP, / leads
// to the console, and other unknown paths keep the JSON 404.
func TestConsoleRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: "127.0.0.1:0", Tick: -1})
	if err != nil {
		t.Fatalf("stack.Start: %v", err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// reply is what the checks read of an answer; send closes the body.
	type reply struct {
		StatusCode int
		Header     http.Header
	}
	send := func(method, path, host string, header map[string]string) reply {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, s.URL+path, strings.NewReader("confirm=x"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if host != "" {
			req.Host = host
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		_ = res.Body.Close()
		return reply{res.StatusCode, res.Header}
	}
	body := `{"id":"keep-me","cron":"@hourly","target":{"type":"builtin","builtin":{"name":"noop"}}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/Schedules/schedules", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.Token)
	res0, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	_ = res0.Body.Close()
	if res0.StatusCode != http.StatusCreated {
		t.Fatalf("create: HTTP %d", res0.StatusCode)
	}

	if res := send("POST", "/console/schedules/keep-me/pause", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: HTTP %d, want 403", res.StatusCode)
	}
	if res := send("GET", "/console/", "rebound.evil.example", nil); res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: HTTP %d, want 421", res.StatusCode)
	}
	res := send("GET", "/console/", "", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'self'") ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("console page: HTTP %d, headers %v", res.StatusCode, res.Header)
	}
	if res := send("GET", "/", "", nil); res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/console/" {
		t.Errorf("GET /: HTTP %d Location %q, want 302 to /console/", res.StatusCode, res.Header.Get("Location"))
	}
	if res := send("GET", "/nothing-here", "", nil); res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Errorf("unknown path: HTTP %d %s, want the JSON 404", res.StatusCode, res.Header.Get("Content-Type"))
	}
	// A filter the API refuses: the page answers the API's 400 and shows
	// its message with the field it names.
	page := func(path string, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, html := page("/console/runs?status=exploded", nil); code != http.StatusBadRequest || !strings.Contains(html, "status: ") || !strings.Contains(html, "exploded") {
		t.Errorf("runs?status=exploded: HTTP %d, want 400 showing the API's field and message:\n%s", code, html)
	}
	// The script's poll gets only <main>'s content.
	if code, html := page("/console/", map[string]string{"X-Console-Fragment": "1"}); code != http.StatusOK || strings.Contains(html, "<html") || !strings.Contains(html, "<h1>Schedules</h1>") || !strings.Contains(html, "keep-me") {
		t.Errorf("fragment: HTTP %d:\n%s", code, html)
	}
	// A delete without the typed confirmation deletes nothing.
	if res := send("POST", "/console/schedules/keep-me/delete", "", nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("delete without confirmation: HTTP %d, want 400", res.StatusCode)
	}
	req, _ = http.NewRequestWithContext(ctx, "GET", s.URL+"/Schedules/schedules/keep-me", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("keep-me after the refused requests: %v %v, want it still there", res, err)
	} else {
		var sc struct{ Enabled bool }
		_ = json.NewDecoder(res.Body).Decode(&sc)
		_ = res.Body.Close()
		if !sc.Enabled {
			t.Errorf("the cross-site POST paused keep-me")
		}
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
