// hailq dashboard, the overview: charts whose history comes from the database
// (/api/levels, recorded every 10 s by workers and `hailq serve`), then a live point
// every few seconds from /overview.json; every cell of the table and the tiles
// refreshed in place, value and highlight. Queues are looked up in Maps: a queue may be
// named "constructor" or "toString", which a plain object already "has".
"use strict";

window.hailq.charts.start("overview-data", function (initial, chart) {
  const hailq = window.hailq;
  const charts = hailq.charts;
  const perQueue = new Map(); // queue name -> its ready history, for the sparklines

  function queueHistory(name) {
    let h = perQueue.get(name);
    if (!h) { h = charts.history(["ready"]); perQueue.set(name, h); }
    return h;
  }

  // What the database recorded: totals per 10 s slot, and each queue's ready counts.
  function load(doc) {
    chart.load(doc.totals);
    for (const q of doc.queues) charts.load(queueHistory(q.name), q, { ready: "ready" });
  }

  // One live point from /overview.json.
  function record(doc) {
    const t = doc.totals;
    chart.add(doc.at, { ready: t.ready, in_flight: t.in_flight, dead: t.dead,
                        sent: chart.sentRate(doc.at, t.sent, t.sent_1m),
                        acked: t.acked_1m || 0 });
    for (const q of doc.queues) charts.add(queueHistory(q.name), doc.at, { ready: q.ready });
  }

  function count(n, capped) { return hailq.fmt(n) + (capped ? "+" : ""); }

  function age(s) {
    if (s === null || s === undefined) return "-";
    if (s < 1) return Math.round(s * 1000) + "ms";
    if (s < 10) return s.toFixed(1) + "s";
    if (s < 60) return Math.round(s) + "s";
    const i = Math.floor(s);
    const pad = (v) => String(v).padStart(2, "0");
    if (i < 3600) return Math.floor(i / 60) + "m " + pad(i % 60) + "s";
    if (i < 86400) return Math.floor(i / 3600) + "h " + pad(Math.floor(i % 3600 / 60)) + "m";
    return Math.floor(i / 86400) + "d " + Math.floor(i % 86400 / 3600) + "h";
  }

  function rate(v) {
    if (v === null || v === undefined) return "-";
    return (v < 100 ? v.toFixed(1) : Math.round(v).toLocaleString("en-US")) + "/s";
  }

  // A cell's text (in its link, if it has one) and its highlight classes.
  function cell(row, cls, text, marks) {
    const td = row.querySelector("td." + cls);
    if (!td) return;
    const target = td.querySelector("a") || td;
    if (target.textContent !== text) target.textContent = text;
    for (const name of Object.keys(marks)) td.classList.toggle(name, Boolean(marks[name]));
  }

  function workersCell(row, q) {
    const td = row.querySelector("td.f-workers");
    if (!td) return;
    td.textContent = String(q.workers);
    if (q.desired_workers !== q.workers) {
      const wants = document.createElement("span");
      wants.className = "muted";
      wants.textContent = " \u2192 " + q.desired_workers;
      td.appendChild(wants);
    }
    td.dataset.workers = String(q.workers);
    td.dataset.desired = String(q.desired_workers);
  }

  function stateCell(row, q) {
    row.classList.toggle("paused", q.paused);
    const badge = row.querySelector("td[data-field=state] .badge");
    if (badge) {
      badge.textContent = q.paused ? "paused" : "active";
      badge.className = "badge " + (q.paused ? "paused" : "ok");
    }
    const button = row.querySelector("button[data-action=pause], button[data-action=resume]");
    if (button) {
      button.dataset.action = q.paused ? "resume" : "pause";
      button.textContent = q.paused ? "Resume" : "Pause";
    }
  }

  function tiles(doc) {
    const t = doc.totals;
    const shown = new Map([
      ["queues", hailq.fmt(t.queues)], ["paused", hailq.fmt(t.paused)],
      ["ready", count(t.ready, t.ready_capped)],
      ["in_flight", count(t.in_flight, t.in_flight_capped)],
      ["delayed", count(t.delayed, t.delayed_capped)], ["dead", count(t.dead, t.dead_capped)],
      ["breaches_5m", hailq.fmt(t.breaches_5m)], ["workers", hailq.fmt(t.workers)],
    ]);
    for (const [key, text] of shown) {
      const node = document.querySelector('[data-total="' + key + '"]');
      if (node) node.textContent = text;
    }
    const tile = (key) => { const n = document.querySelector('[data-total="' + key + '"]');
                            return n ? n.closest(".tile") : null; };
    const dead = tile("dead"), breaches = tile("breaches_5m");
    if (dead) dead.classList.toggle("bad", t.dead > 0);
    if (breaches) breaches.classList.toggle("warn", t.breaches_5m > 0);
  }

  // Update the page from one poll; true if the set of queues changed (reload for rows).
  function update(doc) {
    tiles(doc);
    const rows = new Map();
    for (const row of document.querySelectorAll("#queues tbody tr[data-queue]")) {
      rows.set(row.dataset.queue, row);
    }
    let changed = doc.queues.length !== rows.size;
    for (const q of doc.queues) {
      const row = rows.get(q.name);
      if (!row) { changed = true; continue; }
      const capped = new Set(q.capped);
      stateCell(row, q);
      cell(row, "f-ready", count(q.ready, capped.has("ready")), { zero: q.ready === 0 });
      cell(row, "f-in_flight", count(q.in_flight, capped.has("in_flight")),
           { zero: q.in_flight === 0 });
      cell(row, "f-delayed", count(q.delayed, capped.has("scheduled")), { zero: q.delayed === 0 });
      cell(row, "f-dead", count(q.dead, capped.has("dead")), { zero: q.dead === 0, bad: q.dead > 0 });
      cell(row, "f-oldest", age(q.oldest_ready_age), {});
      cell(row, "f-sent", rate(q.sent_1m), {});
      cell(row, "f-acked", rate(q.acked_1m), {});
      cell(row, "f-breaches", hailq.fmt(q.breaches_5m),
           { zero: q.breaches_5m === 0, warn: q.breaches_5m > 0 });
      workersCell(row, q);
      charts.sparkline(row.querySelector("svg.sparkline"), perQueue.get(q.name));
    }
    chart.draw();
    return changed;
  }

  async function poll() {
    const doc = await hailq.api("GET", "/overview.json");
    record(doc);
    if (update(doc)) window.location.reload(); // a queue came or went
  }

  return {
    query: "",
    load: load,
    live: function () {
      const first = JSON.parse(initial.textContent);
      record(first);
      update(first);
      hailq.every(poll);
    },
  };
});
