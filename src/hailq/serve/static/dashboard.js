// hailq dashboard: live overview charts, and the buttons that call the JSON API.
// No framework, no build step, nothing fetched from anywhere but this server.
"use strict";

(function () {
  const HISTORY = 200; // points kept per series (10 minutes at 3 s)
  const body = document.body;
  const refresh = Math.max(1, Number(body.dataset.refresh || 3)) * 1000;

  // -- messages to the operator ----------------------------------------------------------
  function toast(text, isError) {
    const el = document.getElementById("toast");
    if (!el) return;
    el.textContent = text;
    el.className = "toast" + (isError ? " error" : "");
    el.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { el.hidden = true; }, isError ? 8000 : 4000);
  }

  function fmt(n) { return Number(n).toLocaleString("en-US"); }

  // -- the JSON API ----------------------------------------------------------------------
  async function api(method, path, payload) {
    const response = await fetch(path, {
      method: method,
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: payload === undefined ? undefined : JSON.stringify(payload),
      credentials: "same-origin",
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const message = data && data.error ? data.error.message : response.statusText;
      throw new Error(message || ("HTTP " + response.status));
    }
    return data;
  }

  function queuePath(queue) { return "/api/queues/" + encodeURIComponent(queue); }

  const ACTIONS = {
    pause: async (b) => {
      await api("POST", queuePath(b.dataset.queue) + "/pause", {});
      return "Paused " + b.dataset.queue + ": workers get nothing from it until resumed.";
    },
    resume: async (b) => {
      await api("POST", queuePath(b.dataset.queue) + "/resume", {});
      return "Resumed " + b.dataset.queue + ".";
    },
    "redrive-one": async (b) => {
      const r = await api("POST", queuePath(b.dataset.queue) + "/dead/redrive", { ids: [b.dataset.id] });
      return "Redrove " + fmt(r.redriven) + " message.";
    },
    "delete-one": async (b) => {
      if (!window.confirm("Delete dead letter " + b.dataset.id + " for good?")) return null;
      const r = await api("POST", queuePath(b.dataset.queue) + "/dead/delete", { ids: [b.dataset.id] });
      return "Deleted " + fmt(r.deleted) + " message.";
    },
    "purge-live": async (b) => {
      if (!window.confirm("Delete every live message of " + b.dataset.queue + " (" + b.dataset.count
                          + " now: ready, delayed, in flight and blocked)? Dead letters stay.")) return null;
      const r = await api("POST", queuePath(b.dataset.queue) + "/purge", {});
      return "Purged " + fmt(r.purged) + " messages.";
    },
    "purge-dead": async (b) => {
      if (!window.confirm("Delete every dead letter of " + b.dataset.queue + " (" + b.dataset.count
                          + ") for good?")) return null;
      const r = await api("POST", queuePath(b.dataset.queue) + "/purge", { dead: true });
      return "Purged " + fmt(r.purged) + " dead letters.";
    },
    // Any other API call a page offers: data-method, data-path, data-body (JSON),
    // data-confirm (asked first), data-done (said after), data-then (where to go next).
    call: async (b) => {
      if (b.dataset.confirm && !window.confirm(b.dataset.confirm)) return null;
      await api(b.dataset.method, b.dataset.path,
                b.dataset.body ? JSON.parse(b.dataset.body) : undefined);
      return b.dataset.done || "Done.";
    },
    "redrive-matching": async () => bulk("redrive", "Redrive", "redriven"),
    "delete-matching": async () => bulk("delete", "Delete for good", "deleted"),
  };

  // A bulk action runs on the server over every match of the filter (up to its limit),
  // after the operator confirmed the number the page counted.
  async function bulk(verb, label, field) {
    const box = document.getElementById("bulk");
    const n = Number(box.dataset.count);
    const filter = JSON.parse(box.dataset.filter);
    const what = [];
    if (filter.error) what.push("error contains \u201c" + filter.error + "\u201d");
    if (filter.older_than) what.push("dead for longer than " + filter.older_than + " s");
    if (filter.ordering_key) what.push("ordering key \u201c" + filter.ordering_key + "\u201d");
    const question = label + " " + fmt(n) + " dead letter" + (n === 1 ? "" : "s") + " of "
      + box.dataset.queue + (what.length ? " matching " + what.join(" and ") : "") + "?";
    if (!window.confirm(question)) return null;
    const r = await api("POST", queuePath(box.dataset.queue) + "/dead/" + verb, filter);
    return (verb === "redrive" ? "Redrove " : "Deleted ") + fmt(r[field]) + " dead letter"
      + (r[field] === 1 ? "" : "s") + ".";
  }

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button || !ACTIONS[button.dataset.action]) return;
    button.disabled = true;
    try {
      const done = await ACTIONS[button.dataset.action](button);
      if (done) {
        toast(done, false);
        sessionStorage.setItem("hailq-toast", done);
        const next = button.dataset.then;
        setTimeout(() => { if (next) window.location.assign(next); else window.location.reload(); }, 300);
      }
    } catch (error) {
      toast(error.message, true);
    } finally {
      button.disabled = false;
    }
  });

  // An operator's override of a queue's settings: the filled fields only.
  const configure = document.getElementById("configure");
  if (configure) {
    configure.addEventListener("submit", async (event) => {
      event.preventDefault();
      const changes = {};
      for (const input of configure.querySelectorAll("input")) {
        const value = input.value.trim();
        if (value === "") continue;
        changes[input.name] = input.name === "rate" ? value : Number(value);
      }
      if (Object.keys(changes).length === 0) { toast("Fill in a setting to override.", true); return; }
      try {
        await api("PATCH", queuePath(configure.dataset.queue), changes);
        const done = "Overrode " + Object.keys(changes).join(", ") + ".";
        sessionStorage.setItem("hailq-toast", done);
        window.location.reload();
      } catch (error) {
        toast(error.message, true);
      }
    });
  }

  const left = sessionStorage.getItem("hailq-toast");
  if (left) { sessionStorage.removeItem("hailq-toast"); toast(left, false); }

  // -- hiding payloads -------------------------------------------------------------------
  const toggle = document.getElementById("payloads");
  if (toggle) {
    toggle.addEventListener("click", () => {
      const hide = body.dataset.payloads !== "hidden";
      document.cookie = "hailq_payloads=" + (hide ? "hidden" : "shown")
        + "; path=/; max-age=31536000; samesite=strict";
      window.location.reload();
    });
  }

  // -- the overview's live charts --------------------------------------------------------
  const initial = document.getElementById("overview-data");
  if (!initial) return;

  const history = { at: [], ready: [], in_flight: [], dead: [], sent: [], acked: [] };
  const perQueue = {}; // queue -> ready history, for the sparklines
  let lastSent = null;

  function push(series, value) {
    series.push(value);
    if (series.length > HISTORY) series.shift();
  }

  function record(doc) {
    const t = doc.totals;
    let sentRate = 0;
    if (lastSent !== null && doc.at > lastSent.at) {
      sentRate = Math.max(t.sent - lastSent.sent, 0) / (doc.at - lastSent.at);
    }
    if (lastSent === null) sentRate = t.sent_1m || 0;
    lastSent = { at: doc.at, sent: t.sent };
    push(history.at, doc.at);
    push(history.ready, t.ready);
    push(history.in_flight, t.in_flight);
    push(history.dead, t.dead);
    push(history.sent, sentRate);
    push(history.acked, t.acked_1m || 0);
    for (const q of doc.queues) {
      if (!perQueue[q.name]) perQueue[q.name] = [];
      push(perQueue[q.name], q.ready);
    }
  }

  const SVG = "http://www.w3.org/2000/svg";
  function el(name, attrs) {
    const node = document.createElementNS(SVG, name);
    for (const k in attrs) node.setAttribute(k, attrs[k]);
    return node;
  }

  function nice(max) {
    if (max <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(max)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= max) return m * p;
    return 10 * p;
  }

  function draw(svg, names, unit) {
    const W = 600, H = 160, top = 8, bottom = 4;
    const n = history.at.length;
    let max = 0;
    for (const name of names) for (const v of history[name]) max = Math.max(max, v);
    const scale = nice(max);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    for (const f of [0, 0.5, 1]) {
      const y = top + (H - top - bottom) * (1 - f);
      svg.appendChild(el("line", { x1: 0, x2: W, y1: y, y2: y, class: "axis" }));
    }
    const label = el("text", { x: 4, y: top + 10 });
    label.textContent = fmt(Math.round(scale * 100) / 100) + unit;
    svg.appendChild(label);
    for (const name of names) {
      const values = history[name];
      const points = values.map((v, i) => {
        const x = n <= 1 ? W : (i / (n - 1)) * W;
        const y = top + (H - top - bottom) * (1 - v / scale);
        return x.toFixed(1) + "," + y.toFixed(1);
      });
      if (points.length === 1) points.unshift("0," + points[0].split(",")[1]);
      svg.appendChild(el("polyline", { points: points.join(" "), class: "line s-" + name,
                                       "data-series": name }));
    }
    svg.dataset.points = String(n);
    const last = {};
    for (const name of names) last[name] = history[name][history[name].length - 1];
    svg.dataset.last = JSON.stringify(last);
  }

  function sparkline(row, values) {
    const svg = row.querySelector("svg.sparkline");
    if (!svg) return;
    const max = Math.max(1, ...values);
    const pts = values.map((v, i) => {
      const x = values.length <= 1 ? 100 : (i / (values.length - 1)) * 100;
      return x.toFixed(1) + "," + (19 - (v / max) * 18).toFixed(1);
    });
    if (pts.length === 1) pts.unshift("0," + pts[0].split(",")[1]);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.appendChild(el("polyline", { points: pts.join(" ") }));
  }

  function count(n, capped) { return fmt(n) + (capped ? "+" : ""); }

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

  function cell(row, cls, text, zero) {
    const td = row.querySelector("td." + cls);
    if (!td) return;
    const target = td.querySelector("a") || td;
    target.textContent = text;
    td.classList.toggle("zero", zero);
  }

  function update(doc) {
    const t = doc.totals;
    const totals = {
      queues: fmt(t.queues), paused: fmt(t.paused), ready: count(t.ready, t.ready_capped),
      in_flight: count(t.in_flight, t.in_flight_capped), delayed: count(t.delayed, t.delayed_capped),
      dead: count(t.dead, t.dead_capped), breaches_5m: fmt(t.breaches_5m), workers: fmt(t.workers),
    };
    for (const k in totals) {
      const node = document.querySelector('[data-total="' + k + '"]');
      if (node) node.textContent = totals[k];
    }
    const rows = {};
    for (const row of document.querySelectorAll("#queues tbody tr[data-queue]")) rows[row.dataset.queue] = row;
    let changed = doc.queues.length !== Object.keys(rows).length;
    for (const q of doc.queues) {
      const row = rows[q.name];
      if (!row) { changed = true; continue; }
      if (row.classList.contains("paused") !== q.paused) changed = true;
      const capped = new Set(q.capped);
      cell(row, "f-ready", count(q.ready, capped.has("ready")), q.ready === 0);
      cell(row, "f-in_flight", count(q.in_flight, capped.has("in_flight")), q.in_flight === 0);
      cell(row, "f-delayed", count(q.delayed, capped.has("scheduled")), q.delayed === 0);
      cell(row, "f-dead", count(q.dead, capped.has("dead")), q.dead === 0);
      row.querySelector("td.f-dead").classList.toggle("bad", q.dead > 0);
      cell(row, "f-oldest", age(q.oldest_ready_age), false);
      cell(row, "f-sent", rate(q.sent_1m), false);
      cell(row, "f-acked", rate(q.acked_1m), false);
      cell(row, "f-breaches", fmt(q.breaches_5m), q.breaches_5m === 0);
      sparkline(row, perQueue[q.name] || []);
    }
    draw(document.getElementById("chart-depth"), ["ready", "in_flight", "dead"], "");
    draw(document.getElementById("chart-rate"), ["sent", "acked"], "/s");
    return changed;
  }

  const live = document.getElementById("live");
  function showLive(on) {
    live.hidden = false;
    live.className = "live " + (on ? "on" : "off");
    live.textContent = on ? "live \u00b7 every " + refresh / 1000 + "s" : "paused while hidden";
  }

  let busy = false;
  async function poll() {
    if (document.visibilityState !== "visible" || busy) return;
    busy = true;
    try {
      const doc = await api("GET", "/overview.json");
      record(doc);
      if (update(doc)) window.location.reload(); // a queue came, went, paused or resumed
    } catch (error) {
      live.className = "live off";
      live.textContent = "not updating: " + error.message;
    } finally {
      busy = false;
    }
  }

  record(JSON.parse(initial.textContent));
  update(JSON.parse(initial.textContent));
  showLive(document.visibilityState === "visible");
  setInterval(poll, refresh);
  document.addEventListener("visibilitychange", () => {
    const on = document.visibilityState === "visible";
    showLive(on);
    if (on) poll();
  });
})();
