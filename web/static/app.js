// Progressive enhancement only: every page works without JavaScript.
"use strict";

// Live updates: the server sends an event whenever its view of Kueue changes;
// the page then fetches itself again and swaps in its live parts (elements
// with data-live and an id). Forms and filters outside them are left alone.
(function () {
  const live = document.querySelectorAll("[data-live][id]");
  if (live.length === 0 || !window.EventSource) return;
  const main = document.querySelector("main");
  let shown = Number(main.dataset.snapshot || 0);
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const res = await fetch(location.href, { headers: { "X-Live": "1" }, cache: "no-store" });
      if (res.ok) {
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        const fetched = doc.querySelector("main");
        if (fetched) shown = Number(fetched.dataset.snapshot || shown);
        for (const el of document.querySelectorAll("[data-live][id]")) {
          const fresh = doc.getElementById(el.id);
          if (fresh && fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
        }
        document.body.dataset.liveVersion = String(Number(document.body.dataset.liveVersion || 0) + 1);
      }
    } catch (_) { /* the next event retries */ }
    busy = false;
    if (again) { again = false; refresh(); }
  }
  const source = new EventSource("/events");
  source.addEventListener("snapshot", (ev) => {
    if (Number(ev.data) > shown) refresh();
  });
  // A refused stream (the console is at its limit of live streams) is not
  // retried: the page refreshes its live parts every 30 seconds instead.
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED) setInterval(refresh, 30000);
  });
})();
