package app

// WorkerJS is the service worker template (go-app fills {{.Version}} and {{.ResourcesToCache}}).
// It precaches the app shell of one version, answers the shell's files from that cache, never
// touches the API, and shows the offline page when a navigation cannot reach the server. The
// pages themselves are not cached ("/" redirects to /login without a session); the offline
// page's unversioned links (/web/app.css) are answered by their cached versioned copies.
const WorkerJS = `// Porthole service worker, version {{.Version}}.
const cacheName = "porthole-{{.Version}}";
const resourcesToCache = {{.ResourcesToCache}}.filter((r) => r !== "/");
const offlinePage = resourcesToCache.find((r) => r.startsWith("/web/offline.html")) || "/web/offline.html";

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(cacheName);
    await cache.addAll(resourcesToCache);
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    const keys = await caches.keys();
    await Promise.all(keys.filter((k) => k !== cacheName).map((k) => caches.delete(k)));
    // No clients.claim(): a first visit stays as it loaded, and a worker that activates while
    // a page is controlled is a new version, which the page offers to reload into.
  })());
});

function bypass(url, request) {
  return request.method !== "GET" ||
    url.origin !== self.location.origin ||
    url.pathname.startsWith("/api/") ||
    url.pathname === "/healthz" || url.pathname === "/readyz" || url.pathname === "/metrics";
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (bypass(url, request)) {
    return; // the network answers, as if there were no worker
  }
  if (request.mode === "navigate") {
    event.respondWith((async () => {
      try {
        return await fetch(request);
      } catch (err) {
        const cache = await caches.open(cacheName);
        return (await cache.match(offlinePage)) || Response.error();
      }
    })());
    return;
  }
  event.respondWith((async () => {
    const cached = await caches.match(request, { cacheName: cacheName });
    if (cached) {
      return cached;
    }
    try {
      return await fetch(request);
    } catch (err) {
      // Offline: a file of this version under another ?v= (the offline page links /web/app.css).
      const any = await caches.match(request, { cacheName: cacheName, ignoreSearch: true });
      if (any) {
        return any;
      }
      throw err;
    }
  })());
});
`
