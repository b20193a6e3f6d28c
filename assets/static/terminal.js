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
//   h.setFixedSize(c, r) // watchers: the PTY's size, scaled down to fit; (0, 0) = fit again
//   h.setReadOnly(bool)
//   h.size()          // {cols, rows}; 0×0 until the first fit
//   h.text()          // the active buffer's lines joined by "\n" (tests, search fallback)
//   h.term            // the xterm.js Terminal (tests read term.buffer.active)
//   h.dispose()
//
//   window.porthole.term.noBlur(el)      // mousedown/touch on el's buttons keeps the terminal focused
//   window.porthole.term.watchViewport(cb) // visualViewport changes → CSS vars + cb()
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
    };
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
      fontSize: opts.fontSize || 14,
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
      if (!window.WebglAddon || opts.webgl === false) return;
      try {
        const probe = document.createElement("canvas");
        if (!probe.getContext("webgl2")) return;
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
    // fixed (the grid is the PTY's size and scales down to fit; watchers).
    let visible = true;
    let fixed = null;
    let fitted = false; // the grid has been fitted to the host once
    function fit() {
      if (disposed || !visible || el.clientWidth === 0 || el.clientHeight === 0) return;
      if (fixed) { scaleToHost(); return; }
      // onResize fires when the grid changes; the first fit reports the size
      // even when it is xterm.js's default, so the server learns it.
      try { fitAddon.fit(); } catch (e) { return; /* not laid out yet */ }
      if (!fitted && term.cols > 0 && term.rows > 0) {
        fitted = true;
        cb.resize(term.cols, term.rows);
      }
    }
    function scaleToHost() {
      const x = term.element;
      if (!x) return;
      x.style.transform = "";
      const w = x.scrollWidth, hgt = x.scrollHeight;
      if (!w || !hgt) return;
      const s = Math.min(1, el.clientWidth / w, el.clientHeight / hgt);
      x.style.transformOrigin = "0 0";
      x.style.transform = s < 1 ? "scale(" + s + ")" : "";
    }
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
        if (readOnly || !navigator.clipboard || !navigator.clipboard.readText) return;
        navigator.clipboard.readText().then(function (t) { if (t) term.paste(t); }).catch(function () {});
      },
      // writeLocal writes text of our own (a notice): not output, never acknowledged.
      writeLocal: function (text) { if (!disposed) term.write(String(text)); },
      reset: function () { term.reset(); },
      // resetAcks forgets unacknowledged bytes (call it when a new connection starts).
      resetAcks: function () { epoch++; unacked = 0; },
      setAckBytes: function (n) { if (n > 0) ackBytes = n; },
      // setFixedSize(cols, rows) shows the grid at exactly that size, scaled
      // down to the host; setFixedSize(0, 0) goes back to fitting the host.
      setFixedSize: function (cols, rows) {
        if (cols > 0 && rows > 0) {
          fixed = { cols: cols, rows: rows };
          if (term.cols !== cols || term.rows !== rows) term.resize(cols, rows);
          requestAnimationFrame(scaleToHost);
        } else {
          fixed = null;
          if (term.element) term.element.style.transform = "";
          fitSoon();
        }
      },
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

  // watchViewport tracks the visual viewport (the part of the page the soft
  // keyboard leaves visible): it sets --porthole-vvh (visible height) and
  // --porthole-kb (height hidden by the keyboard) on <html>, so the keys bar
  // can sit right above the keyboard, and calls cb() so terminals refit.
  function watchViewport(cb) {
    const vv = window.visualViewport;
    const root = document.documentElement;
    let lastKb = 0;
    const update = function () {
      const h = vv ? vv.height : window.innerHeight;
      const top = vv ? vv.offsetTop : 0;
      const kb = Math.max(0, window.innerHeight - h - top);
      root.style.setProperty("--porthole-vvh", h + "px");
      root.style.setProperty("--porthole-kb", kb + "px");
      // Each panel fills the rest of the page below where it starts.
      document.querySelectorAll(".terminal-panel").forEach(function (p) {
        const y = p.getBoundingClientRect().top + window.scrollY;
        p.style.setProperty("--porthole-terminal-top", Math.max(0, Math.round(y)) + "px");
      });
      // The soft keyboard just opened over a focused terminal: bring the
      // terminal's bottom (and the keys bar) right above it.
      const a = document.activeElement;
      const panel = a && a.closest ? a.closest(".terminal-panel") : null;
      if (kb > lastKb && panel) panel.scrollIntoView({ block: "end" });
      lastKb = kb;
      if (cb) cb();
    };
    update();
    const target = vv || window;
    target.addEventListener("resize", update);
    if (vv) vv.addEventListener("scroll", update);
    // The page above a panel can change height (a header loads): follow the
    // body's size too, once per frame.
    let frame = 0;
    const soon = function () {
      if (!frame) frame = requestAnimationFrame(function () { frame = 0; update(); });
    };
    const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(soon) : null;
    if (ro) ro.observe(document.body);
    return function () {
      target.removeEventListener("resize", update);
      if (vv) vv.removeEventListener("scroll", update);
      if (ro) ro.disconnect();
      if (frame) cancelAnimationFrame(frame);
    };
  }

  porthole.term = {
    create: create,
    noBlur: noBlur,
    watchViewport: watchViewport,
    handles: handles,
    // all returns the live handles as an array (tests).
    all: function () { return Array.from(handles); },
  };
})();
