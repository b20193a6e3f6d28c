// desktop.js — Porthole's canvas for the Go (WASM) desktop panel (app/desktop_*.go).
//
// The Go side owns the WebSocket, the protocol (docs/desktop-protocol.md), the view's
// geometry and the touch gestures; this file draws and reports raw events:
//
//   const h = window.porthole.desk.create(hostElement, {
//     onViewport(w, h),                 // the viewport's size in CSS px
//     onScroll(x, y),                   // the viewport was scrolled (scroll bars)
//     onPointer(kind, type, id, x, y, buttons) // kind down/move/up/cancel; type mouse/pen/touch;
//                                       //   x, y relative to the viewport; DOM buttons mask
//     onWheel(x, y, dx, dy, deltaMode),
//     onKey(down, code),                // only while capturing (we hold control)
//     onText(text),                     // IME composition, soft keyboard, paste-as-typing
//     onDrawn(seq),                     // every frame up to seq is on the canvas
//     onClipboard(text),                // readClipboard's answer
//     onNotice(text),                   // a message for the user
//   });
// Callbacks into Go always run as microtasks, never inside a call Go made.
//   h.setSize(w, h)                     // a new display size (clears)
//   h.rect(buffer, offset, x, y, w, h, enc, flags, cx, cy, cw, ch)
//                                       // an encoded region: bytes from offset to the end of the
//                                       //   ArrayBuffer (transferred to the decoder worker); enc 1
//                                       //   JPEG, 2 PNG, 3 palette; flags 1 = half-size image; with
//                                       //   cx..ch only the pixels in that clip are drawn (ClipRect)
//   h.copy(sx, sy, x, y, w, h)          // copy a region of the canvas (a moved window), in order
//                                       //   with the rects of the frame
//   h.frameEnd(seq)                     // draw what came since the last frameEnd, in order, then onDrawn(seq)
//   h.resetFrames()                     // a new connection: forget frames not yet drawn
//   h.cursorShape(rgba, w, h, hotX, hotY) / h.cursorPos(x, y, local)
//   h.setView(scale, offX, offY, scrollX, scrollY)
//   h.setCapture(on)                    // keys go to the desktop (preventDefault)
//   h.setTrackpad(on)                   // always show the cursor
//   h.focusKeyboard()                   // focus the hidden input with the soft keyboard
//   h.fullscreen()                      // toggle fullscreen of the panel
//   h.readClipboard() / h.writeClipboard(text)
//   h.stats()                           // {frames, rects, copies, fills, worker, decodeErrors} (tests)
//   h.canvas                            // the display's canvas (tests read its pixels)
//   h.dispose()
//
// Decoding is off the main thread: a Worker running this same file (worker-src 'self')
// turns JPEG/PNG bytes into ImageBitmaps with createImageBitmap, and palette data (inflated
// with DecompressionStream) into ImageData then an ImageBitmap; without Worker support, the
// same on the main thread (still asynchronous); without createImageBitmap, an <img> with a
// data: URL (the CSP allows img-src data:, not blob:), or a canvas for a palette. A one-colour
// palette is a fill, drawn without decoding.
(function () {
  "use strict";

  // inflate reads a raw deflate stream (RFC 1951) that must give exactly need bytes.
  function inflate(body, need) {
    if (typeof DecompressionStream === "undefined") return Promise.reject(new Error("this browser cannot inflate (no DecompressionStream)"));
    const ds = new DecompressionStream("deflate-raw");
    const w = ds.writable.getWriter();
    w.write(body).catch(function () {});
    w.close().catch(function () {});
    const rd = ds.readable.getReader();
    const out = new Uint8Array(need);
    let got = 0;
    function pump() {
      return rd.read().then(function (r) {
        if (r.done) {
          if (got !== need) throw new Error("palette: the indices inflate to " + got + " bytes, want " + need);
          return out;
        }
        if (got + r.value.length > need) {
          rd.cancel().catch(function () {});
          throw new Error("palette: the indices inflate past the image");
        }
        out.set(r.value, got);
        got += r.value.length;
        return pump();
      });
    }
    return pump();
  }

  // decodePalette turns palette data (docs/desktop-protocol.md) of a w×h image into RGBA.
  function decodePalette(b, w, h) {
    if (!(w > 0 && h > 0 && w <= 8192 && h <= 8192) || b.length < 4) return Promise.reject(new Error("palette: bad size"));
    const n = b[0] + 1;
    if (b.length < 1 + 3 * n) return Promise.reject(new Error("palette: short palette"));
    const out = new Uint8ClampedArray(w * h * 4);
    if (n === 1) {
      if (b.length !== 4) return Promise.reject(new Error("palette: bytes after a fill"));
      for (let i = 0; i < out.length; i += 4) { out[i] = b[1]; out[i + 1] = b[2]; out[i + 2] = b[3]; out[i + 3] = 255; }
      return Promise.resolve(out);
    }
    const bits = n <= 2 ? 1 : n <= 4 ? 2 : n <= 16 ? 4 : 8, per = 8 / bits, mask = (1 << bits) - 1;
    const comp = b[1 + 3 * n], body = b.subarray(2 + 3 * n);
    // Raw: the indices one after the other; deflate: rows padded to a byte (rb bytes each).
    const rb = comp === 0 ? 0 : Math.ceil(w * bits / 8);
    const need = comp === 0 ? Math.ceil(w * h * bits / 8) : rb * h;
    let idx;
    if (comp === 0) idx = body.length === need ? Promise.resolve(body) : Promise.reject(new Error("palette: " + body.length + " bytes of indices, want " + need));
    else if (comp === 1) idx = inflate(body, need);
    else idx = Promise.reject(new Error("palette: compression " + comp));
    return idx.then(function (r) {
      for (let y = 0; y < h; y++) {
        for (let x = 0; x < w; x++) {
          const i = comp === 0 ? y * w + x : y * rb * per + x; // the index's position, in indices
          const v = bits === 8 ? r[i] : (r[(i / per) | 0] >> (8 - bits * (i % per + 1))) & mask;
          if (v >= n) throw new Error("palette: index " + v + " of " + n + " colours");
          const o = (y * w + x) * 4, p = 1 + 3 * v;
          out[o] = b[p]; out[o + 1] = b[p + 1]; out[o + 2] = b[p + 2]; out[o + 3] = 255;
        }
      }
      return out;
    });
  }

  // decodeBitmap decodes in the worker or on the main thread when createImageBitmap exists.
  function decodeBitmap(bytes, type, enc, w, h) {
    if (enc === 3) return decodePalette(bytes, w, h).then(function (px) { return createImageBitmap(new ImageData(px, w, h)); });
    return createImageBitmap(new Blob([bytes], { type: type }));
  }

  // In the decoder worker: decode and hand the bitmap back (transferred, not copied).
  if (typeof document === "undefined" && typeof self !== "undefined" && typeof postMessage === "function") {
    self.onmessage = function (e) {
      const m = e.data;
      decodeBitmap(new Uint8Array(m.buf, m.off), m.type, m.enc, m.w, m.h).then(
        function (bmp) { self.postMessage({ id: m.id, bmp: bmp }, [bmp]); },
        function (err) { self.postMessage({ id: m.id, err: String(err) }); }
      );
    };
    return;
  }

  const porthole = (window.porthole = window.porthole || {});
  const scriptURL = document.currentScript ? document.currentScript.src : "";
  const handles = new Set();
  const types = { 1: "image/jpeg", 2: "image/png", 3: "palette" };

  // One decoder worker for every viewer of the page.
  let worker = null;
  let workerFailed = false;
  let nextID = 1;
  const waiting = new Map();
  function getWorker() {
    if (worker || workerFailed || !scriptURL || typeof Worker === "undefined" || typeof createImageBitmap === "undefined") return worker;
    try {
      worker = new Worker(scriptURL);
      worker.onmessage = function (e) {
        const w = waiting.get(e.data.id);
        if (!w) { if (e.data.bmp) e.data.bmp.close(); return; }
        waiting.delete(e.data.id);
        if (e.data.bmp) w.resolve(e.data.bmp); else w.reject(new Error(e.data.err));
      };
      worker.onerror = function () {
        // The worker could not start (blocked): decode on the main thread from now on.
        workerFailed = true;
        worker = null;
        waiting.forEach(function (w) { w.reject(new Error("decoder worker failed")); });
        waiting.clear();
      };
    } catch (e) {
      workerFailed = true;
      worker = null;
    }
    return worker;
  }

  // decode turns the image at offset in buffer (iw×ih pixels) into something drawImage draws.
  function decode(buffer, offset, enc, iw, ih) {
    const type = types[enc] || "image/jpeg";
    const w = getWorker();
    if (w) {
      return new Promise(function (resolve, reject) {
        const id = nextID++;
        waiting.set(id, { resolve: resolve, reject: reject });
        w.postMessage({ id: id, buf: buffer, off: offset, type: type, enc: enc, w: iw, h: ih }, [buffer]);
      });
    }
    const bytes = new Uint8Array(buffer, offset);
    if (typeof createImageBitmap !== "undefined") return decodeBitmap(bytes, type, enc, iw, ih);
    if (enc === 3) {
      return decodePalette(bytes, iw, ih).then(function (px) {
        const c = document.createElement("canvas");
        c.width = iw; c.height = ih;
        c.getContext("2d").putImageData(new ImageData(px, iw, ih), 0, 0);
        return c;
      });
    }
    const blob = new Blob([bytes], { type: type });
    return new Promise(function (resolve, reject) {
      const r = new FileReader();
      r.onload = function () {
        const img = new Image();
        img.onload = function () { resolve(img); };
        img.onerror = function () { reject(new Error("image did not decode")); };
        img.src = r.result;
      };
      r.onerror = function () { reject(r.error); };
      r.readAsDataURL(blob);
    });
  }

  function create(host, opts) {
    opts = opts || {};
    let disposed = false;
    const later = function (f) {
      if (!f) return function () {};
      return function () {
        const args = arguments;
        queueMicrotask(function () { if (!disposed) f.apply(null, args); });
      };
    };
    const cb = {
      viewport: later(opts.onViewport), scroll: later(opts.onScroll), pointer: later(opts.onPointer),
      wheel: later(opts.onWheel), key: later(opts.onKey), text: later(opts.onText),
      drawn: later(opts.onDrawn), clipboard: later(opts.onClipboard), notice: later(opts.onNotice),
    };

    // The viewport scrolls (1:1 and zoomed views); the canvas sits inside at the view's offset.
    const vp = document.createElement("div");
    vp.className = "desktop-viewport";
    vp.tabIndex = -1;
    const canvas = document.createElement("canvas");
    canvas.className = "desktop-canvas";
    canvas.width = 1;
    canvas.height = 1;
    const g = canvas.getContext("2d", { alpha: false });
    const cur = document.createElement("canvas");
    cur.className = "desktop-cursor";
    cur.hidden = true;
    // The keyboard input: focused while we hold control; inputmode none unless the keyboard
    // button asked for the soft keyboard.
    const kb = document.createElement("textarea");
    kb.className = "desktop-input";
    kb.setAttribute("aria-label", "Keyboard input to the desktop");
    kb.setAttribute("autocapitalize", "off");
    kb.setAttribute("autocomplete", "off");
    kb.setAttribute("autocorrect", "off");
    kb.setAttribute("spellcheck", "false");
    kb.setAttribute("inputmode", "none");
    vp.appendChild(canvas);
    vp.appendChild(cur);
    host.appendChild(vp);
    host.appendChild(kb);

    let dw = 0, dh = 0;
    let view = { scale: 1, ox: 0, oy: 0, sx: 0, sy: 0 };
    let capture = false, trackpad = false;
    let cursor = { x: 0, y: 0, w: 0, h: 0, hx: 0, hy: 0, seen: false };
    const stats = { frames: 0, rects: 0, copies: 0, fills: 0, worker: false, decodeErrors: 0 };

    // Frames: the rects of the frame being received, and a chain drawing frames in order.
    let epoch = 0;
    let pending = [];
    let chain = Promise.resolve();

    function setSize(w, hgt) {
      const e = epoch;
      chain = chain.then(function () {
        if (e !== epoch || disposed) return;
        dw = w; dh = hgt;
        canvas.width = w;
        canvas.height = hgt;
        g.fillStyle = "#000";
        g.fillRect(0, 0, w, hgt);
        layout();
      });
    }
    function rect(buffer, offset, x, y, w, hgt, enc, flags, cx, cy, cw, ch) {
      stats.rects++;
      const clip = cw > 0 && ch > 0 ? [cx, cy, cw, ch] : null;
      const scaled = (flags & 1) === 1;
      const iw = scaled ? (w + 1) >> 1 : w, ih = scaled ? (hgt + 1) >> 1 : hgt;
      if (enc === 3 && buffer.byteLength - offset === 4 && new Uint8Array(buffer, offset, 1)[0] === 0) {
        const c = new Uint8Array(buffer, offset + 1, 3); // a one-colour palette: a fill
        stats.fills++;
        pending.push(Promise.resolve({ fill: "rgb(" + c[0] + "," + c[1] + "," + c[2] + ")", x: x, y: y, w: w, h: hgt, clip: clip }));
        return;
      }
      const p = decode(buffer, offset, enc, iw, ih).then(
        function (bmp) { return { bmp: bmp, x: x, y: y, w: w, h: hgt, clip: clip }; },
        function (err) { stats.decodeErrors++; console.warn("porthole desktop: decode", err); return null; }
      );
      if (worker) stats.worker = true;
      pending.push(p);
    }
    function copy(sx, sy, x, y, w, hgt) {
      stats.copies++;
      pending.push(Promise.resolve({ copy: true, sx: sx, sy: sy, x: x, y: y, w: w, h: hgt }));
    }
    function draw(r) {
      if (r.copy) { // the canvas onto itself: the source is copied first, so overlaps are fine
        g.drawImage(canvas, r.sx, r.sy, r.w, r.h, r.x, r.y, r.w, r.h);
        return;
      }
      if (r.clip) {
        g.save();
        g.beginPath();
        g.rect(r.clip[0], r.clip[1], r.clip[2], r.clip[3]);
        g.clip();
      }
      if (r.fill) {
        g.fillStyle = r.fill;
        g.fillRect(r.x, r.y, r.w, r.h);
      } else {
        g.drawImage(r.bmp, r.x, r.y, r.w, r.h); // scaled rects stretch to w×h
      }
      if (r.clip) g.restore();
    }
    function frameEnd(seq) {
      const rs = pending;
      pending = [];
      const e = epoch;
      chain = chain.then(function () { return Promise.all(rs); }).then(function (done) {
        for (const r of done) {
          if (!r) continue;
          if (e === epoch && !disposed) draw(r);
          if (r.bmp && r.bmp.close) r.bmp.close();
        }
        if (e === epoch && !disposed) {
          stats.frames++;
          cb.drawn(seq);
        }
      });
    }
    function resetFrames() {
      epoch++;
      pending = [];
    }

    function layout() {
      canvas.style.width = dw * view.scale + "px";
      canvas.style.height = dh * view.scale + "px";
      canvas.style.left = view.ox + "px";
      canvas.style.top = view.oy + "px";
      if (Math.abs(vp.scrollLeft - view.sx) > 0.5) vp.scrollLeft = view.sx;
      if (Math.abs(vp.scrollTop - view.sy) > 0.5) vp.scrollTop = view.sy;
      placeCursor();
    }
    function placeCursor() {
      const show = cursor.seen && (cursor.w > 0 || trackpad);
      cur.hidden = !show;
      if (!show) return;
      const w = cursor.w || 12, hgt = cursor.h || 12, hx = cursor.w ? cursor.hx : 6, hy = cursor.w ? cursor.hy : 6;
      cur.style.width = w * view.scale + "px";
      cur.style.height = hgt * view.scale + "px";
      cur.style.left = view.ox + (cursor.x - hx) * view.scale + "px";
      cur.style.top = view.oy + (cursor.y - hy) * view.scale + "px";
    }
    function defaultCursor() {
      cur.width = 12; cur.height = 12;
      const c = cur.getContext("2d");
      c.clearRect(0, 0, 12, 12);
      c.beginPath();
      c.arc(6, 6, 5, 0, 2 * Math.PI);
      c.fillStyle = "rgba(255,255,255,0.85)";
      c.fill();
      c.lineWidth = 1.5;
      c.strokeStyle = "#000";
      c.stroke();
    }
    defaultCursor();

    // Events.
    const listeners = [];
    function on(el, type, f, o) { el.addEventListener(type, f, o); listeners.push([el, type, f, o]); }
    function rel(ev) {
      const r = vp.getBoundingClientRect();
      return [ev.clientX - r.left - vp.clientLeft, ev.clientY - r.top - vp.clientTop];
    }
    function syncScroll() {
      if (Math.abs(vp.scrollLeft - view.sx) > 0.5 || Math.abs(vp.scrollTop - view.sy) > 0.5) {
        view.sx = vp.scrollLeft; view.sy = vp.scrollTop;
        cb.scroll(view.sx, view.sy);
      }
    }
    function pointer(kind) {
      return function (ev) {
        if (ev.target === kb) return;
        syncScroll();
        const p = rel(ev);
        if (kind === "down") {
          if (ev.pointerType !== "touch") {
            // A click on the display keeps the keys going to it (no soft keyboard here).
            if (capture) kb.focus({ preventScroll: true });
            try { vp.setPointerCapture(ev.pointerId); } catch (e) { /* gone */ }
          }
          if (capture || ev.pointerType === "touch") ev.preventDefault();
        }
        cb.pointer(kind, ev.pointerType || "mouse", ev.pointerId, p[0], p[1], ev.buttons);
      };
    }
    on(vp, "pointerdown", pointer("down"));
    on(vp, "pointermove", pointer("move"));
    on(vp, "pointerup", pointer("up"));
    on(vp, "pointercancel", pointer("cancel"));
    on(vp, "contextmenu", function (ev) { ev.preventDefault(); });
    on(vp, "wheel", function (ev) {
      if (!capture) return; // watchers scroll the page (or the 1:1 view)
      ev.preventDefault();
      const p = rel(ev);
      cb.wheel(p[0], p[1], ev.deltaX, ev.deltaY, ev.deltaMode);
    }, { passive: false });
    on(vp, "scroll", syncScroll);

    // Keys: by physical code, unless an IME composes or the key has no code (soft keyboards
    // send "Unidentified"/229): then the text arrives through input/compositionend.
    const down = new Set();
    let composing = false;
    on(kb, "keydown", function (ev) {
      if (!capture) return;
      if (composing || ev.isComposing || ev.keyCode === 229 || !ev.code || ev.key === "Unidentified" || ev.key === "Process") return;
      ev.preventDefault();
      down.add(ev.code);
      cb.key(true, ev.code);
    });
    on(kb, "keyup", function (ev) {
      if (!down.has(ev.code)) return;
      ev.preventDefault();
      down.delete(ev.code);
      cb.key(false, ev.code);
    });
    function releaseKeys() {
      down.forEach(function (c) { cb.key(false, c); });
      down.clear();
    }
    on(kb, "blur", releaseKeys);
    on(kb, "compositionstart", function () { composing = true; });
    on(kb, "compositionend", function (ev) {
      composing = false;
      if (capture && ev.data) cb.text(ev.data);
      kb.value = "";
    });
    on(kb, "input", function (ev) {
      if (composing || ev.isComposing) return;
      if (capture) {
        if (ev.inputType === "insertLineBreak" || ev.inputType === "insertParagraph") { cb.key(true, "Enter"); cb.key(false, "Enter"); }
        else if (ev.inputType === "deleteContentBackward") { cb.key(true, "Backspace"); cb.key(false, "Backspace"); }
        else if (ev.data) cb.text(ev.data);
        else if (kb.value) cb.text(kb.value);
      }
      kb.value = "";
    });
    on(kb, "paste", function (ev) {
      // Ctrl+V goes to the desktop as keys; a paste that reaches the input (menu, phone) is typed.
      ev.preventDefault();
      const t = ev.clipboardData ? ev.clipboardData.getData("text/plain") : "";
      if (capture && t) cb.text(t);
    });

    const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(function () {
      cb.viewport(vp.clientWidth, vp.clientHeight);
      fitPanel();
    }) : null;
    if (ro) ro.observe(vp);
    // The panel fills the page below where it starts (CSS var), like the terminal.
    function fitPanel() {
      const panel = host.closest(".desktop-panel");
      if (!panel) return;
      const y = panel.getBoundingClientRect().top + window.scrollY;
      panel.style.setProperty("--porthole-desktop-top", Math.max(0, Math.round(y)) + "px");
    }
    on(window, "resize", fitPanel);
    fitPanel();
    queueMicrotask(function () { if (!disposed) cb.viewport(vp.clientWidth, vp.clientHeight); });

    const h = {
      canvas: canvas,
      setSize: setSize,
      rect: rect,
      copy: copy,
      frameEnd: frameEnd,
      resetFrames: resetFrames,
      cursorShape: function (rgba, w, hgt, hx, hy) {
        cursor.w = w; cursor.h = hgt; cursor.hx = hx; cursor.hy = hy;
        if (w === 0 || hgt === 0) { defaultCursor(); placeCursor(); return; }
        cur.width = w; cur.height = hgt;
        cur.getContext("2d").putImageData(new ImageData(rgba, w, hgt), 0, 0);
        placeCursor();
      },
      cursorPos: function (x, y) {
        cursor.x = x; cursor.y = y; cursor.seen = true;
        placeCursor();
      },
      setView: function (scale, ox, oy, sx, sy) {
        view = { scale: scale, ox: ox, oy: oy, sx: sx, sy: sy };
        layout();
      },
      setCapture: function (on) {
        capture = !!on;
        vp.classList.toggle("capture", capture);
        if (capture) kb.focus({ preventScroll: true });
        else { releaseKeys(); kb.setAttribute("inputmode", "none"); }
      },
      setTrackpad: function (on) { trackpad = !!on; vp.classList.toggle("trackpad", trackpad); placeCursor(); },
      focusKeyboard: function () {
        kb.setAttribute("inputmode", "text");
        kb.focus({ preventScroll: true });
      },
      fullscreen: function () {
        const panel = host.closest(".desktop-panel") || host;
        if (document.fullscreenElement) { document.exitFullscreen().catch(function () {}); return; }
        if (!panel.requestFullscreen) { cb.notice("Fullscreen is not available in this browser."); return; }
        panel.requestFullscreen().catch(function (e) { cb.notice("Fullscreen was refused: " + e.message); });
      },
      readClipboard: function () {
        if (!navigator.clipboard || !navigator.clipboard.readText) { cb.notice("This browser does not let the page read the clipboard: paste into the box and send it."); return; }
        navigator.clipboard.readText().then(function (t) { cb.clipboard(t); },
          function () { cb.notice("Reading the clipboard was not allowed: paste into the box and send it."); });
      },
      writeClipboard: function (text) {
        if (!navigator.clipboard || !navigator.clipboard.writeText) { cb.notice("This browser does not let the page write the clipboard."); return; }
        navigator.clipboard.writeText(String(text)).then(function () { cb.notice("Copied to your clipboard."); },
          function () { cb.notice("Writing the clipboard was not allowed."); });
      },
      stats: function () { return Object.assign({}, stats); },
      // view: the layout as the Go side set it (tests map display points to the page).
      view: function () { return Object.assign({ dw: dw, dh: dh }, view); },
      dispose: function () {
        if (disposed) return;
        disposed = true;
        epoch++;
        handles.delete(h);
        if (ro) ro.disconnect();
        listeners.forEach(function (l) { l[0].removeEventListener(l[1], l[2], l[3]); });
        vp.remove();
        kb.remove();
      },
    };
    handles.add(h);
    return h;
  }

  porthole.desk = {
    create: create,
    handles: handles,
    all: function () { return Array.from(handles); },
  };
})();
