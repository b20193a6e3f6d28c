// Compiles and instantiates app.wasm for go-app's app.js (patched by app/cmd/gen to call
// portholeInstantiate), once the pre-rendered page has painted: on a small machine, downloading
// and compiling the module competes with loading, parsing and painting the page for the CPU,
// and the page is what the user sees first. It also marks the milestones the first-render
// benchmark reads (performance.getEntriesByType("mark")).
(function () {
  function mark(name) { if (performance.mark) performance.mark(name); }

  var painted = new Promise(function (resolve) {
    var afterPaint = function () {
      requestAnimationFrame(function () { setTimeout(resolve, 0); });
      setTimeout(resolve, 250); // rAF does not run in a hidden tab
    };
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", afterPaint);
    else afterPaint();
  });

  window.portholeInstantiate = async function (url, imports) {
    await painted;
    mark("porthole-wasm-compile-start");
    var resp = fetch(url).then(function (r) {
      mark("porthole-wasm-response");
      return r;
    });
    var module;
    if (WebAssembly.compileStreaming) {
      // A streamed compile from a service-worker-cached Response is also what V8 may keep
      // compiled code for, across visits.
      module = await WebAssembly.compileStreaming(resp);
    } else {
      module = await WebAssembly.compile(await (await resp).arrayBuffer());
    }
    mark("porthole-wasm-compiled");
    var instance = await WebAssembly.instantiate(module, imports);
    mark("porthole-wasm-instantiated");
    return { module: module, instance: instance };
  };

  // The pre-rendered page (login.html, the shell) is usable before the app runs: a submit of
  // its login form is held (app/login.go sends it once mounted), and focus moves to the app's
  // element of the same id when the app replaces the page, so typing goes on where it was.
  var focusedID = "";
  document.addEventListener("submit", function (e) {
    if (e.target.closest && e.target.closest("[data-prerendered]")) {
      e.preventDefault();
      window.portholePendingLogin = true;
    }
  }, true);
  document.addEventListener("focusin", function (e) {
    if (e.target.closest && e.target.closest("[data-prerendered]")) focusedID = e.target.id || "";
  }, true);
  function watchTakeover() {
    new MutationObserver(function (records, observer) {
      if (document.querySelector("[data-prerendered]")) return;
      observer.disconnect();
      mark("porthole-app-mounted");
      var el = focusedID && document.getElementById(focusedID);
      if (el && (document.activeElement === document.body || !document.activeElement)) {
        el.focus();
        if (typeof el.value === "string" && el.setSelectionRange) {
          try { el.setSelectionRange(el.value.length, el.value.length); } catch (err) { /* not a text input */ }
        }
      }
    }).observe(document.body, { childList: true });
  }
  if (document.body) watchTakeover();
  else document.addEventListener("DOMContentLoaded", watchTakeover);
})();
