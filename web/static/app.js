// Progressive enhancement only: every page works without JavaScript.
"use strict";

// Narrow screens show a table's rows as cards (app.css): each cell is
// labelled with its column's heading.
function labelCells(root) {
  for (const table of root.querySelectorAll("table.grid")) {
    const head = table.tHead && table.tHead.rows[table.tHead.rows.length - 1];
    if (!head) continue;
    const labels = [];
    for (const th of head.cells) {
      for (let i = 0; i < th.colSpan; i++) labels.push(th.textContent.trim());
    }
    for (const body of [...table.tBodies, table.tFoot]) {
      if (!body) continue;
      for (const row of body.rows) {
        let col = 0;
        for (const cell of row.cells) {
          if (labels[col] && !cell.hasAttribute("data-label")) cell.setAttribute("data-label", labels[col]);
          col += cell.colSpan;
        }
      }
    }
  }
}
// A print button (the usage report) prints the page with its print styles.
for (const button of document.querySelectorAll("button[data-print]")) {
  button.hidden = false;
  button.addEventListener("click", () => window.print());
}

// Live updates: the page opens a stream for its own view (its address) and
// the server pushes the live parts (elements with data-live and an id) that
// changed, rendered once for everyone watching the same view. Forms and
// filters outside them are left alone.
(function () {
  const live = document.querySelectorAll("[data-live][id]");
  if (live.length === 0 || !window.EventSource) return;
  const main = document.querySelector("main");
  let shown = Number(main.dataset.snapshot || 0);
  // What the server sent for each live part: labelCells adds attributes, so
  // the part's innerHTML is not what to compare with.
  const received = new Map();
  for (const el of live) received.set(el.id, el.innerHTML);

  function swap(fragments) {
    for (const [id, html] of Object.entries(fragments)) {
      const el = document.getElementById(id);
      if (el && el.hasAttribute("data-live") && received.get(id) !== html) {
        el.innerHTML = html;
        received.set(id, html);
      }
    }
    labelCells(document);
    document.body.dataset.liveVersion = String(Number(document.body.dataset.liveVersion || 0) + 1);
  }

  const view = location.pathname + location.search;
  const source = new EventSource("/events?view=" + encodeURIComponent(view) + "&v=" + shown);
  source.addEventListener("fragments", (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.version < shown) return;
    shown = msg.version;
    main.dataset.snapshot = String(shown);
    const asOf = document.getElementById("as-of");
    if (asOf && msg.asOf) asOf.textContent = msg.asOf;
    swap(msg.fragments);
  });

  // The heartbeat carries the banner of what is missing (the cluster not
  // answering, say): shown while there is one, gone once it clears.
  source.addEventListener("problem", (ev) => {
    const text = JSON.parse(ev.data);
    let banner = document.getElementById("problem");
    if (!text) {
      if (banner) banner.remove();
      return;
    }
    if (!banner) {
      banner = document.createElement("div");
      banner.className = "problem";
      banner.id = "problem";
      banner.setAttribute("role", "alert");
      main.querySelector("h1").after(banner);
    }
    banner.textContent = text;
  });

  // The console ends a stream after a while, or when the viewer signed out,
  // the session expired or what they may see changed; the browser then
  // reconnects, through the checks of a new request. A refused stream (the
  // console is at its limit of live streams) is not retried: the page
  // fetches itself at once and every 30 seconds and takes its live parts
  // from the answer. An answer that needs sign-in or says the page is no
  // longer the viewer's reloads the page, which shows why.
  async function refresh() {
    try {
      const res = await fetch(location.href, { headers: { "X-Live": "1" }, cache: "no-store" });
      if (res.status === 401 || res.status === 403) {
        location.reload();
        return;
      }
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const fragments = {};
      for (const el of doc.querySelectorAll("[data-live][id]")) fragments[el.id] = el.innerHTML;
      swap(fragments);
    } catch (_) { /* the next round retries */ }
  }
  source.addEventListener("error", () => {
    if (source.readyState !== EventSource.CLOSED) return;
    refresh();
    setInterval(refresh, 30000);
  });
})();

// Parts the console answered before Prometheus or the task history did
// (data-filling): the page asks for itself again a few times, and takes
// each part once it is answered.
(function () {
  let tries = 0;
  async function fill() {
    const filling = document.querySelectorAll("[data-filling][id]");
    if (filling.length === 0 || tries++ >= 8) return;
    try {
      const res = await fetch(location.href, { cache: "no-store" });
      if (res.ok) {
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        for (const el of filling) {
          const fresh = doc.getElementById(el.id);
          if (fresh && !fresh.hasAttribute("data-filling")) el.replaceWith(fresh);
        }
        labelCells(document);
      }
    } catch (_) { /* the next round retries */ }
    setTimeout(fill, 1000 * tries);
  }
  setTimeout(fill, 500);
})();

labelCells(document);
