// Starts compiling app.wasm as soon as the page's head is parsed, instead of after the deferred
// scripts ran: the compile overlaps the rest of the page load. app.js (patched by app/cmd/gen)
// calls portholeInstantiate, which uses the module compiled here.
(function () {
  var link = document.querySelector('link[rel="preload"][href*="/web/app.wasm"]');
  var early = null, earlyURL = "";
  if (link && WebAssembly.compileStreaming) {
    earlyURL = link.getAttribute("href");
    // Same mode and credentials as the preload (crossorigin=anonymous), so it is reused.
    early = WebAssembly.compileStreaming(fetch(earlyURL));
    early.catch(function () { /* app.js falls back to its own fetch */ });
  }
  window.portholeInstantiate = async function (url, imports) {
    if (early && url === earlyURL) {
      try {
        var module = await early;
        return { module: module, instance: await WebAssembly.instantiate(module, imports) };
      } catch (err) {
        console.warn("early app.wasm compile failed, retrying:", err);
      }
    }
    return WebAssembly.instantiateStreaming(fetch(url), imports);
  };
})();
