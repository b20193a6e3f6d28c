// terminal.js — Porthole's glue between the Go (WASM) terminal panel and xterm.js.
//
// The Go side (app/terminal_*.go) owns the WebSocket and the terminal protocol;
// this file only wraps xterm.js so that Go never has to touch its objects:
//
//   const h = window.porthole.term.create(hostElement, {
//     readOnly:  false,         // watchers: keystrokes are not forwarded
//     fontSize:  14,
//     scrollback: 5000,         // lines kept by xterm.js itself
//     ackBytes:  65536,         // flow control: acknowledge in batches of this many bytes
//     onData(str),              // user input (keys, paste), UTF-16 JS string
//     onBinary(str),            // binary input (some mouse reports), one char per byte
//     onResize(cols, rows),     // the grid changed size (after fit)
//     onTitle(str),             // OSC 0/2 window title — a plain string: show it as TEXT
//     onAck(bytes),             // bytes xterm.js has parsed and rendered since the last ack
//     onSearch(index, count),   // search results changed (index -1: none selected)
//     onNotice(str),            // a message for the user (the browser refused a paste)
//     onFontSize(px),           // a pinch changed the text size (remember it)
//   });
//   h.write(u8, cb)   // write output (Uint8Array or string); cb() once it is parsed
//
// Callbacks into Go (on*) are always called asynchronously (microtasks), in order.
//   h.fit()           // fit the grid to the host element (no-op while hidden)
//   h.show(bool)      // show/hide this terminal inside the host (tabs share one host)
//   h.focus()         // focus the hidden textarea (soft keyboard on phones)
//   h.search(text, backwards) / h.clearSearch()
//   h.copy()          // copy the selection to the clipboard; returns the text
//   h.paste(text)     // paste as if typed (bracketed paste honoured)
//   h.pasteClipboard()// read the clipboard (if allowed) and paste it
//   h.writeLocal(str) // a notice of the app's own (not counted for flow control)
//   h.reset()         // clear screen and scrollback (before a gap/replay)
//   h.resetAcks()     // a new connection: forget bytes not yet acknowledged
//   h.setAckBytes(n)  // batch size of acknowledgements (a fraction of the server's window)
//   h.setFixedSize(c, r) // watchers: show exactly the PTY's grid: the font shrinks until it
//                        // fits (never a CSS scale), or the grid pans; (0, 0) = fit again
//   h.setFontSize(px)    // the preferred text size (a watcher's fitted size stays at most this)
//   h.setReadOnly(bool)
//   h.size()          // {cols, rows}; 0×0 until the first fit
//   h.text()          // the active buffer's lines joined by "\n" (tests, search fallback)
//   h.term            // the xterm.js Terminal (tests read term.buffer.active)
//   h.dispose()
//
//   window.porthole.term.noBlur(el)      // mousedown/touch on el's buttons keeps the terminal focused
//   window.porthole.term.watchViewport(cb) // visualViewport changes → CSS vars + cb()
//   window.porthole.term.setFontSize(px) // every live terminal (the app's text size setting)
//   window.porthole.term.handles         // live handles, for tests
//
// Flow control follows ttyd and the xterm.js guide ("flow control"): every
// write passes a callback; the bytes it carried are acknowledged once xterm.js
// has processed them, in batches of ackBytes, and at the latest when no write
// is pending any more, so a small server window never stalls.
(function () {
  "use strict";
  const porthole = (window.porthole = window.porthole || {});
  const handles = new Set();
  const enc = new TextEncoder();

  // hardwareWebGL reports, once per page, whether WebGL runs on a GPU. Software WebGL
  // (SwiftShader, llvmpipe) is slower than xterm.js's DOM renderer, and Chromium warns in the
  // console for every software context.
  let webglOK = null;
  function hardwareWebGL() {
    if (webglOK !== null) return webglOK;
    webglOK = false;
    try {
      const g = document.createElement("canvas").getContext("webgl2");
      if (g) {
        const info = g.getExtension("WEBGL_debug_renderer_info");
        const r = info ? String(g.getParameter(info.UNMASKED_RENDERER_WEBGL)) : "";
        webglOK = !/swiftshader|llvmpipe|softpipe|software/i.test(r);
        const lose = g.getExtension("WEBGL_lose_context");
        if (lose) lose.loseContext();
      }
    } catch (e) { /* no WebGL */ }
    return webglOK;
  }

  function create(host, opts) {
    opts = opts || {};
    let disposed = false;
    // Every callback into Go runs as a microtask, never inside a call that Go
    // made (h.fit, h.paste, ...): Go code may hold a lock while calling us.
    const later = function (f) {
      if (!f) return function () {};
      return function () {
        const args = arguments;
        queueMicrotask(function () { if (!disposed) f.apply(null, args); });
      };
    };
    const cb = {
      data: later(opts.onData),
      binary: later(opts.onBinary),
      resize: later(opts.onResize),
      title: later(opts.onTitle),
      ack: later(opts.onAck),
      search: later(opts.onSearch),
      notice: later(opts.onNotice),
      fontSize: later(opts.onFontSize),
    };
    let prefSize = opts.fontSize || 14;
    let ackBytes = opts.ackBytes > 0 ? opts.ackBytes : 65536;

    const el = document.createElement("div");
    el.className = "porthole-xterm";
    host.appendChild(el);

    const term = new Terminal({
      allowProposedApi: true, // needed by the search addon's decorations
      convertEol: false,
      cursorBlink: true,
      disableStdin: !!opts.readOnly,
      fontFamily: opts.fontFamily || 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
      fontSize: prefSize,
      scrollback: opts.scrollback || 5000,
      theme: { background: "#101317", foreground: "#d8dee9" },
    });
    const fitAddon = new FitAddon.FitAddon();
    term.loadAddon(fitAddon);
    let searchAddon = null;
    if (window.SearchAddon) {
      searchAddon = new SearchAddon.SearchAddon();
      term.loadAddon(searchAddon);
      searchAddon.onDidChangeResults(function (r) {
        cb.search(r ? r.resultIndex : -1, r ? r.resultCount : 0);
      });
    }
    term.open(el);

    // The WebGL renderer where the browser has it; the DOM renderer otherwise
    // (no GPU, context lost, addon missing) — silently.
    let webgl = null;
    function loadWebgl() {
      if (!window.WebglAddon || opts.webgl === false || !hardwareWebGL()) return;
      try {
        webgl = new WebglAddon.WebglAddon();
        webgl.onContextLoss(function () {
          try { webgl.dispose(); } catch (e) { /* already gone */ }
          webgl = null;
        });
        term.loadAddon(webgl);
      } catch (e) {
        if (webgl) { try { webgl.dispose(); } catch (e2) { /* ignore */ } }
        webgl = null;
      }
    }
    loadWebgl();

    let readOnly = !!opts.readOnly;
    const subs = [];
    subs.push(term.onData(function (d) { if (!readOnly) cb.data(d); }));
    subs.push(term.onBinary(function (d) { if (!readOnly) cb.binary(d); }));
    subs.push(term.onResize(function (s) { cb.resize(s.cols, s.rows); }));
    subs.push(term.onTitleChange(function (t) { cb.title(String(t)); }));

    // Copy on select (where the clipboard API is allowed), and the usual
    // terminal shortcuts: Ctrl+Shift+C copies, Ctrl+Shift+V pastes through the
    // browser's own paste event (xterm.js turns it into onData).
    subs.push(term.onSelectionChange(function () {
      if (term.hasSelection()) writeClipboard(term.getSelection());
    }));
    term.attachCustomKeyEventHandler(function (ev) {
      if (ev.type !== "keydown") return true;
      const k = (ev.key || "").toLowerCase();
      if (ev.ctrlKey && ev.shiftKey && k === "c") { copy(); ev.preventDefault(); return false; }
      if (ev.ctrlKey && ev.shiftKey && k === "v") { return false; } // let the paste event happen
      return true;
    });

    // Flow control: acknowledge parsed bytes in batches.
    // epoch changes on resetAcks (a new connection): bytes written for the old
    // connection are not acknowledged on the new one.
    let pendingWrites = 0;
    let unacked = 0;
    let epoch = 0;
    function acked(n, e) {
      pendingWrites--;
      if (e !== epoch) return;
      unacked += n;
      if (unacked >= ackBytes || (pendingWrites === 0 && unacked > 0)) {
        const a = unacked;
        unacked = 0;
        cb.ack(a);
      }
    }
    function write(data, done) {
      if (disposed) return;
      const n = typeof data === "string" ? enc.encode(data).length : data.length;
      pendingWrites++;
      const e = epoch;
      term.write(data, function () {
        acked(n, e);
        if (done) done();
      });
    }

    // Two sizing modes: fit (the grid follows the host element; drivers) and
    // fixed (the grid is the PTY's size; watchers). A fixed grid is never scaled
    // with CSS (blurry, clipped letters): the font size goes down, in steps,
    // until the whole grid fits, and below minFont the grid pans instead.
    let visible = true;
    let fixed = null;
    let fitted = false; // the grid has been fitted to the host once
    const minFont = 6;
    function fit() {
      if (disposed || !visible || el.clientWidth === 0 || el.clientHeight === 0) return;
      if (fixed) { fitFixed(); return; }
      // onResize fires when the grid changes; the first fit reports the size
      // even when it is xterm.js's default, so the server learns it.
      try { fitAddon.fit(); } catch (e) { return; /* not laid out yet */ }
      if (!fitted && term.cols > 0 && term.rows > 0) {
        fitted = true;
        cb.resize(term.cols, term.rows);
      }
    }
    function gridSize() {
      const s = term.element && term.element.querySelector(".xterm-screen");
      return s ? { w: s.offsetWidth, h: s.offsetHeight } : { w: 0, h: 0 };
    }
    let fixing = 0; // a fitFixed in progress (its generation)
    function fitFixed() {
      if (!fixed || disposed) return;
      const gen = ++fixing;
      if (term.cols !== fixed.cols || term.rows !== fixed.rows) term.resize(fixed.cols, fixed.rows);
      let size = prefSize;
      term.options.fontSize = size;
      // Measure after the renderer has laid out the new size, then shrink: a first
      // guess from the ratio, then half-pixel steps while it still overflows.
      const step = function (n) {
        if (gen !== fixing || disposed || !fixed) return;
        const g = gridSize(), W = el.clientWidth, H = el.clientHeight;
        if (!g.w || !g.h || !W || !H) return;
        const over = g.w > W + 0.5 || g.h > H + 0.5;
        if (over && size > minFont && n < 12) {
          const ratio = Math.min(W / g.w, H / g.h);
          const next = n === 0 ? Math.floor(size * ratio * 2) / 2 : size - 0.5;
          size = Math.max(minFont, Math.min(size - 0.5, next));
          term.options.fontSize = size;
          requestAnimationFrame(function () { step(n + 1); });
          return;
        }
        el.classList.toggle("pan", over); // still too big at the smallest size: scroll to pan
      };
      requestAnimationFrame(function () { step(0); });
    }
    function setFontSize(px) {
      px = Math.max(minFont, Math.min(48, +px || 14));
      prefSize = px;
      if (fixed) { fitFixed(); return; }
      term.options.fontSize = px;
      fitSoon();
    }

    // Pinch (two fingers) changes the text size of every terminal; the size is
    // reported once the fingers lift, so the app can remember it.
    let pinch = null;
    function dist(t) { return Math.hypot(t[0].clientX - t[1].clientX, t[0].clientY - t[1].clientY); }
    const onTouchStart = function (ev) {
      if (ev.touches.length === 2) pinch = { d: dist(ev.touches), size: prefSize };
    };
    const onTouchMove = function (ev) {
      if (!pinch || ev.touches.length !== 2) return;
      ev.preventDefault();
      const next = Math.round(Math.max(minFont + 2, Math.min(40, pinch.size * dist(ev.touches) / pinch.d)));
      if (next !== prefSize) setFontSizeAll(next);
    };
    const onTouchEnd = function (ev) {
      if (pinch && ev.touches.length < 2) { pinch = null; cb.fontSize(prefSize); }
    };
    el.addEventListener("touchstart", onTouchStart, { passive: true });
    el.addEventListener("touchmove", onTouchMove, { passive: false });
    el.addEventListener("touchend", onTouchEnd, { passive: true });
    el.addEventListener("touchcancel", onTouchEnd, { passive: true });
    let fitTimer = 0;
    function fitSoon() {
      if (fitTimer) return;
      fitTimer = requestAnimationFrame(function () { fitTimer = 0; fit(); });
    }
    const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(fitSoon) : null;
    if (ro) ro.observe(el);

    function writeClipboard(text) {
      if (!text || !navigator.clipboard || !navigator.clipboard.writeText) return;
      navigator.clipboard.writeText(text).catch(function () { /* not allowed here */ });
    }
    function copy() {
      const t = term.getSelection();
      writeClipboard(t);
      return t;
    }

    const h = {
      term: term,
      write: write,
      fit: fit,
      show: function (on) {
        visible = !!on;
        el.style.display = visible ? "" : "none";
        if (visible) fitSoon();
      },
      focus: function () { term.focus(); },
      blur: function () { term.blur(); },
      search: function (text, backwards) {
        if (!searchAddon || !text) return false;
        const o = { caseSensitive: false, incremental: !backwards,
          decorations: { matchOverviewRuler: "#888", activeMatchColorOverviewRuler: "#fb0",
            matchBackground: "#555", activeMatchBackground: "#b8860b" } };
        return backwards ? searchAddon.findPrevious(text, o) : searchAddon.findNext(text, o);
      },
      clearSearch: function () {
        if (searchAddon) searchAddon.clearDecorations();
        term.clearSelection();
      },
      copy: copy,
      paste: function (text) { if (!readOnly && text) term.paste(String(text)); },
      pasteClipboard: function () {
        if (readOnly) return;
        const refused = function () {
          cb.notice("The browser did not let Porthole read the clipboard. Paste with Ctrl+Shift+V (or a long press and Paste) in the terminal instead.");
        };
        if (!navigator.clipboard || !navigator.clipboard.readText) { refused(); return; }
        navigator.clipboard.readText().then(function (t) {
          if (t) term.paste(t); else cb.notice("The clipboard is empty.");
        }).catch(refused);
      },
      // writeLocal writes text of our own (a notice): not output, never acknowledged.
      writeLocal: function (text) { if (!disposed) term.write(String(text)); },
      reset: function () { term.reset(); },
      // resetAcks forgets unacknowledged bytes (call it when a new connection starts).
      resetAcks: function () { epoch++; unacked = 0; },
      setAckBytes: function (n) { if (n > 0) ackBytes = n; },
      // setFixedSize(cols, rows) shows the grid at exactly that size, the font
      // fitted to the host; setFixedSize(0, 0) goes back to fitting the host.
      setFixedSize: function (cols, rows) {
        if (cols > 0 && rows > 0) {
          if (fixed && fixed.cols === cols && fixed.rows === rows) return;
          fixed = { cols: cols, rows: rows };
          fitFixed();
        } else if (fixed) {
          fixed = null;
          fixing++;
          el.classList.remove("pan");
          term.options.fontSize = prefSize;
          fitSoon();
        }
      },
      setFontSize: setFontSize,
      fontSize: function () { return term.options.fontSize; },
      setReadOnly: function (on) {
        readOnly = !!on;
        term.options.disableStdin = readOnly;
      },
      // size is the grid's size, or 0×0 before it was first fitted to the host.
      size: function () { return fitted || fixed ? { cols: term.cols, rows: term.rows } : { cols: 0, rows: 0 }; },
      text: function () {
        const b = term.buffer.active;
        const out = [];
        for (let i = 0; i < b.length; i++) {
          const line = b.getLine(i);
          out.push(line ? line.translateToString(true) : "");
        }
        return out.join("\n");
      },
      renderer: function () { return webgl ? "webgl" : "dom"; },
      dispose: function () {
        if (disposed) return;
        disposed = true;
        handles.delete(h);
        if (ro) ro.disconnect();
        if (fitTimer) cancelAnimationFrame(fitTimer);
        fixing++;
        el.removeEventListener("touchstart", onTouchStart);
        el.removeEventListener("touchmove", onTouchMove);
        el.removeEventListener("touchend", onTouchEnd);
        el.removeEventListener("touchcancel", onTouchEnd);
        subs.forEach(function (s) { s.dispose(); });
        term.dispose();
        el.remove();
      },
    };
    handles.add(h);
    fitSoon();
    return h;
  }

  // noBlur keeps the terminal focused (and the soft keyboard up) while the
  // user taps buttons inside el: a prevented mousedown does not move focus.
  function noBlur(el) {
    const stop = function (ev) {
      if (ev.target && ev.target.closest && ev.target.closest("button")) ev.preventDefault();
    };
    el.addEventListener("mousedown", stop);
    return function () { el.removeEventListener("mousedown", stop); };
  }

  // watchViewport calls cb() when the visual viewport (the part of the page the
  // soft keyboard leaves visible) changes, so terminals refit. theme.js keeps
  // --porthole-vvh and --porthole-vvtop on <html> for the agent page's layout,
  // which covers exactly the visual viewport: the keys bar sits right above
  // the keyboard without scrolling.
  function watchViewport(cb) {
    const vv = window.visualViewport;
    const update = function () { if (cb) cb(); };
    const target = vv || window;
    target.addEventListener("resize", update);
    return function () { target.removeEventListener("resize", update); };
  }

  function setFontSizeAll(px) {
    handles.forEach(function (h) { h.setFontSize(px); });
  }

  porthole.term = {
    create: create,
    noBlur: noBlur,
    watchViewport: watchViewport,
    setFontSize: setFontSizeAll,
    handles: handles,
    // all returns the live handles as an array (tests).
    all: function () { return Array.from(handles); },
  };
})();
