// Starts compiling app.wasm as soon as the page's head is parsed, instead of after the deferred
// scripts ran: the compile overlaps the rest of the page load. app.js (patched by app/cmd/gen)
// calls portholeInstantiate, which uses the module compiled here.
(function () {
  var link = document.querySelector('link[rel="preload"][href*="/web/app.wasm"]');
  var early = null, earlyURL = "";
  // Marks for the first-render benchmark's breakdown (performance.getEntriesByType("mark")).
  function mark(name) { if (performance.mark) performance.mark(name); }
  if (link && WebAssembly.compileStreaming) {
    earlyURL = link.getAttribute("href");
    // Same mode and credentials as the preload (crossorigin=anonymous), so it is reused.
    early = WebAssembly.compileStreaming(fetch(earlyURL).then(function (resp) {
      mark("porthole-wasm-response");
      return resp;
    }));
    early.then(function () { mark("porthole-wasm-compiled"); });
    early.catch(function () { /* app.js falls back to its own fetch */ });
  }
  window.portholeInstantiate = async function (url, imports) {
    if (early && url === earlyURL) {
      try {
        var module = await early;
        var instance = await WebAssembly.instantiate(module, imports);
        mark("porthole-wasm-instantiated");
        return { module: module, instance: instance };
      } catch (err) {
        console.warn("early app.wasm compile failed, retrying:", err);
      }
    }
    return WebAssembly.instantiateStreaming(fetch(url), imports);
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
