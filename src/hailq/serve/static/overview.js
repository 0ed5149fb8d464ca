// hailq dashboard, the overview: charts whose history comes from the database
// (/api/levels, recorded every 10 s by workers and `hailq serve`), then a live point
// every few seconds from /overview.json; every cell of the table and the tiles
// refreshed in place, value and highlight. Queues are looked up in Maps: a queue may be
// named "constructor" or "toString", which a plain object already "has".
"use strict";

(function () {
  const initial = document.getElementById("overview-data");
  if (!initial) return;
  const hailq = window.hailq;
  const WINDOW = 3600; // seconds of history the charts show
  const MAX_POINTS = 2000;
  const SERIES = ["ready", "in_flight", "dead", "sent", "acked"];

  const history = { at: [] };
  for (const name of SERIES) history[name] = [];
  const perQueue = new Map(); // queue name -> {at: [], ready: []}, for the sparklines
  let lastSent = null;
  let loaded = 0; // points that came from the database

  function trim(series, at) {
    const cut = at - WINDOW;
    while (series.at.length > 1 && (series.at[0] < cut || series.at.length > MAX_POINTS)) {
      for (const key of Object.keys(series)) series[key].shift();
    }
  }

  function add(at, values) {
    const n = history.at.length;
    if (n && at <= history.at[n - 1]) return; // a poll that raced the history load
    history.at.push(at);
    for (const name of SERIES) history[name].push(values[name] || 0);
    trim(history, at);
  }

  function addQueue(name, at, ready) {
    let series = perQueue.get(name);
    if (!series) { series = { at: [], ready: [] }; perQueue.set(name, series); }
    const n = series.at.length;
    if (n && at <= series.at[n - 1]) return;
    series.at.push(at);
    series.ready.push(ready);
    trim(series, at);
  }

  // What the database recorded: totals per 10 s slot, and each queue's ready counts.
  function load(doc) {
    const t = doc.totals;
    for (let i = 0; i < t.at.length; i++) {
      add(t.at[i], { ready: t.ready[i], in_flight: t.in_flight[i], dead: t.dead[i],
                     sent: t.sent_per_second[i], acked: t.acked_per_second[i] });
    }
    for (const q of doc.queues) {
      for (let i = 0; i < q.at.length; i++) addQueue(q.name, q.at[i], q.ready[i]);
    }
    loaded = t.at.length;
  }

  // One live point from /overview.json.
  function record(doc) {
    const t = doc.totals;
    let sentRate = t.sent_1m || 0;
    if (lastSent !== null && doc.at > lastSent.at) {
      sentRate = Math.max(t.sent - lastSent.sent, 0) / (doc.at - lastSent.at);
    }
    lastSent = { at: doc.at, sent: t.sent };
    add(doc.at, { ready: t.ready, in_flight: t.in_flight, dead: t.dead, sent: sentRate,
                  acked: t.acked_1m || 0 });
    for (const q of doc.queues) addQueue(q.name, doc.at, q.ready);
  }

  const SVG = "http://www.w3.org/2000/svg";
  function el(name, attrs) {
    const node = document.createElementNS(SVG, name);
    for (const k of Object.keys(attrs)) node.setAttribute(k, attrs[k]);
    return node;
  }

  function nice(max) {
    if (max <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(max)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= max) return m * p;
    return 10 * p;
  }

  // x by time: a reload's history at 10 s and live points every few seconds share one axis.
  function xs(at, width) {
    const first = at[0], span = at[at.length - 1] - first;
    return at.map((t) => (at.length <= 1 || span <= 0 ? width : ((t - first) / span) * width));
  }

  function draw(svg, names, unit) {
    if (!svg) return;
    const W = 600, H = 160, top = 8, bottom = 4;
    let max = 0;
    for (const name of names) for (const v of history[name]) max = Math.max(max, v);
    const scale = nice(max);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    for (const f of [0, 0.5, 1]) {
      const y = top + (H - top - bottom) * (1 - f);
      svg.appendChild(el("line", { x1: 0, x2: W, y1: y, y2: y, class: "axis" }));
    }
    const label = el("text", { x: 4, y: top + 10 });
    label.textContent = hailq.fmt(Math.round(scale * 100) / 100) + unit;
    svg.appendChild(label);
    const x = xs(history.at, W);
    for (const name of names) {
      const points = history[name].map((v, i) =>
        x[i].toFixed(1) + "," + (top + (H - top - bottom) * (1 - v / scale)).toFixed(1));
      if (points.length === 1) points.unshift("0," + points[0].split(",")[1]);
      svg.appendChild(el("polyline", { points: points.join(" "), class: "line s-" + name,
                                       "data-series": name }));
    }
    svg.dataset.points = String(history.at.length);
    svg.dataset.history = String(loaded);
    const first = {}, last = {};
    for (const name of names) {
      first[name] = history[name][0];
      last[name] = history[name][history[name].length - 1];
    }
    svg.dataset.first = JSON.stringify(first);
    svg.dataset.last = JSON.stringify(last);
  }

  function sparkline(row, series) {
    const svg = row.querySelector("svg.sparkline");
    if (!svg || !series) return;
    const values = series.ready;
    const max = Math.max(1, ...values);
    const x = xs(series.at, 100);
    const pts = values.map((v, i) => x[i].toFixed(1) + "," + (19 - (v / max) * 18).toFixed(1));
    if (pts.length === 1) pts.unshift("0," + pts[0].split(",")[1]);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.appendChild(el("polyline", { points: pts.join(" ") }));
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
      sparkline(row, perQueue.get(q.name));
    }
    draw(document.getElementById("chart-depth"), ["ready", "in_flight", "dead"], "");
    draw(document.getElementById("chart-rate"), ["sent", "acked"], "/s");
    return changed;
  }

  async function poll() {
    const doc = await hailq.api("GET", "/overview.json");
    record(doc);
    if (update(doc)) window.location.reload(); // a queue came or went
  }

  async function start() {
    const first = JSON.parse(initial.textContent);
    try {
      load(await hailq.api("GET", "/api/levels?seconds=" + WINDOW));
    } catch (error) {
      hailq.toast("chart history not loaded: " + error.message, true);
    }
    record(first);
    update(first);
    document.body.dataset.charts = "ready";
    hailq.every(poll);
  }

  start();
})();
