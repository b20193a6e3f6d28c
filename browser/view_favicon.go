//go:build !js

package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image/png"
	"strings"
	"time"
)

// Tab favicons. The viewer's device never loads anything of the agent's sites: the agent's
// own Chromium draws the page's icon into a small canvas in an isolated world (the page's
// scripts cannot see or change it) and hands the gateway a PNG data URL, which the gateway
// treats as untrusted, checks and re-encodes before a viewer sees it (TabInfo.Favicon).

const (
	// FaviconSize is the side of the square canvas the page's icon is drawn into.
	FaviconSize = 32
	// maxFaviconPNG bounds the PNG the page hands over, and the one the gateway sends.
	maxFaviconPNG = 8 << 10
	// maxFaviconSide bounds the PNG's width and height (the canvas is FaviconSize).
	maxFaviconSide = 64
	// faviconTimeout bounds one favicon fetch inside the page (faviconJS races it too).
	faviconTimeout = 5 * time.Second
)

// faviconJS is called in an isolated world of the page's main frame with the page URL
// (iconKey) its icon was last fetched for. Unless the page is still at that URL, it waits for
// the page to have loaded, finds the page's icon (the first <link rel~=icon>, else
// /favicon.ico of an http(s) page), draws it into a FaviconSize canvas and returns {u: the
// page's URL, d: the canvas's PNG data URL or "", late: true when it gave up waiting}. An
// icon of another origin taints the canvas: no icon.
var faviconJS = fmt.Sprintf(`(async function (done) {
	const S = %d, T = %d;
	const u = location.href.split("#")[0];
	if (u === done) return {u, skip: true};
	const href = () => {
		for (const l of document.querySelectorAll('link[rel~="icon" i]')) if (l.href) return l.href;
		return /^https?:$/.test(location.protocol) ? new URL("/favicon.ico", location.href).href : "";
	};
	const loaded = () => document.readyState === "complete" ? Promise.resolve() :
		new Promise(r => window.addEventListener("load", r, {once: true}));
	const draw = async () => {
		await loaded();
		const h = href();
		if (!h) return "";
		const img = new Image();
		await new Promise((ok, bad) => { img.onload = ok; img.onerror = bad; img.src = h; });
		const c = document.createElement("canvas");
		c.width = c.height = S;
		c.getContext("2d").drawImage(img, 0, 0, S, S);
		return c.toDataURL("image/png");
	};
	const late = new Promise(r => setTimeout(() => r(null), T));
	const d = await Promise.race([draw().catch(() => ""), late]);
	return {u, d: String(d || ""), late: d === null};
})`, FaviconSize, (faviconTimeout - time.Second).Milliseconds())

// sanitizeFavicon checks a favicon data URL from the page and returns it re-encoded by the
// gateway ("data:image/png;base64,…"), or "" when it is not a small, valid PNG.
func sanitizeFavicon(s string) string {
	if !strings.HasPrefix(s, FaviconPrefix) || len(s) > len(FaviconPrefix)+base64.StdEncoding.EncodedLen(maxFaviconPNG) {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(s[len(FaviconPrefix):])
	if err != nil || len(raw) == 0 || len(raw) > maxFaviconPNG {
		return ""
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width < 1 || cfg.Height < 1 || cfg.Width > maxFaviconSide || cfg.Height > maxFaviconSide {
		return ""
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return ""
	}
	var out bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if enc.Encode(&out, img) != nil || out.Len() > maxFaviconPNG {
		return ""
	}
	return FaviconPrefix + base64.StdEncoding.EncodeToString(out.Bytes())
}

// iconKey is the URL a favicon is fetched for: the page's URL without its fragment (a
// page's anchors share its icon).
func iconKey(u string) string {
	if i := strings.IndexByte(u, '#'); i >= 0 {
		return u[:i]
	}
	return u
}

// wantIcon asks the favicon worker to look at the active tab.
func (h *viewHub) wantIcon() {
	select {
	case h.iconKick <- struct{}{}:
	default:
	}
}

// iconLoop is the favicon worker (owner: serve, which waits for it): one fetch at a time,
// so a slow page never holds the view's worker.
func (h *viewHub) iconLoop() {
	for {
		select {
		case <-h.iconKick:
			h.fetchIcon()
		case <-h.ctx.Done():
			return
		}
	}
}

// fetchIcon gets the shown tab's favicon from the page, at most once per page URL. Only
// the favicon worker calls it.
func (h *viewHub) fetchIcon() {
	h.mu.Lock()
	session, frame := h.session, h.attached
	done := ""
	found := false
	for _, x := range h.pages {
		if x.id == frame {
			done, found = x.iconFor, true
		}
	}
	h.mu.Unlock()
	if !found || session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, faviconTimeout)
	defer cancel()
	var r struct {
		Result struct {
			Value struct {
				U    string `json:"u"`
				D    string `json:"d"`
				Late bool   `json:"late"`
				Skip bool   `json:"skip"`
			} `json:"value"`
		} `json:"result"`
		ExceptionDetails any `json:"exceptionDetails"`
	}
	for try := 0; ; try++ {
		if h.iconWorld == 0 || h.iconWorldIn != session+" "+frame {
			var world struct {
				ContextID int64 `json:"executionContextId"`
			}
			if err := h.cdp.call(ctx, session, "Page.createIsolatedWorld", map[string]any{
				"frameId": frame, "worldName": "porthole-favicon"}, &world); err != nil || world.ContextID == 0 {
				h.log.Debug("browser favicon: isolated world", "err", err)
				return
			}
			h.iconWorld, h.iconWorldIn = world.ContextID, session+" "+frame
			try = 1 // a new world: no second try
		}
		err := h.cdp.call(ctx, session, "Runtime.callFunctionOn", map[string]any{
			"functionDeclaration": faviconJS, "executionContextId": h.iconWorld,
			"arguments": []map[string]any{{"value": done}}, "awaitPromise": true, "returnByValue": true}, &r)
		if err == nil {
			break
		}
		h.iconWorld = 0 // the document that had it is gone: a new one for the new document
		if try > 0 || ctx.Err() != nil {
			h.log.Debug("browser favicon", "err", err)
			return
		}
	}
	v := r.Result.Value
	h.log.Debug("browser favicon", "url", v.U, "skip", v.Skip, "late", v.Late, "bytes", len(v.D))
	if v.Skip || v.Late || r.ExceptionDetails != nil || v.U == "" {
		return // the same page, or it is still loading (its load asks again)
	}
	icon := sanitizeFavicon(v.D)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.pages {
		if x.id == frame {
			x.iconFor = iconKey(v.U)
			if x.icon != icon {
				x.icon = icon
				h.tabsChangedLocked()
			}
		}
	}
}
