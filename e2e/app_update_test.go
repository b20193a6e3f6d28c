package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestAppUpdateToastOnNewDeploy: a new version deployed while a person has the app open is
// found by the service worker's own update check (its script changed on the server), installs
// and activates in the background, and the page offers to reload into it. The gateway sits
// behind a proxy that, once "deployed", serves the service worker script one comment longer,
// as a new build would serve a new one.
func TestAppUpdateToastOnNewDeploy(t *testing.T) {
	s := startShellServer(t)
	target, _ := url.Parse(s.URL)
	var deployed atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(target)
	direct := proxy.Director
	proxy.Director = func(r *http.Request) {
		host := r.Host
		direct(r)
		r.Host = host // the gateway sees the address the browser uses (Host and Origin checks)
		if r.URL.Path == "/app-worker.js" {
			r.Header.Del("Accept-Encoding") // a body the proxy can extend
			if deployed.Load() {            // a new build's worker has a new ETag: no 304 for the old one's
				r.Header.Del("If-None-Match")
				r.Header.Del("If-Modified-Since")
			}
		}
	}
	proxy.ModifyResponse = func(resp *http.Response) error {
		if !deployed.Load() || resp.Request.URL.Path != "/app-worker.js" || resp.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		b = append(b, "\n// deployed again\n"...)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		resp.Header.Del("ETag")
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	c := startChromium(t)
	loginUI(t, c, front.URL, "admin", shellAdminPassword)
	js[bool](t, c, `navigator.serviceWorker.ready.then(() => true)`) // the worker is active
	// A page the worker controls (a first visit is not: the worker does not claim it).
	c.steps(t, "reload under the worker", chromedp.Navigate(front.URL+"/"))
	c.until(t, "a controlled dashboard", `!!document.getElementById("own-agents") && navigator.serviceWorker.controller !== null`)
	if js[bool](t, c, `!!document.getElementById("update-toast") && /new version/.test(document.getElementById("update-toast").textContent)`) {
		t.Fatal("the update toast shows before anything was deployed")
	}

	deployed.Store(true)
	js[bool](t, c, `(goappTryUpdate(), true)`) // the app's periodic check, now
	c.until(t, "the update toast", `/new version of Porthole is ready/.test((document.getElementById("update-toast") || {}).textContent || "")`)
}
