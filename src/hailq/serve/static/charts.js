// hailq dashboard: the charts of the overview and of a queue's page. A history holds
// one array per series beside "at" (broker clock); it starts with what the database
// recorded (GET /api/levels: every 10 s, kept an hour) and takes live points after, so a
// reload keeps the last hour. The x axis is time: 10 s slots and live points share it.
"use strict";

(function () {
  const WINDOW = 3600; // seconds of history shown
  const MAX_POINTS = 2000;
  const SVG = "http://www.w3.org/2000/svg";

  function history(names) {
    const h = { at: [] };
    for (const name of names) h[name] = [];
    return h;
  }

  function trim(h, at) {
    const cut = at - WINDOW;
    while (h.at.length > 1 && (h.at[0] < cut || h.at.length > MAX_POINTS)) {
      for (const key of Object.keys(h)) h[key].shift();
    }
  }

  // One point; one older than the last (a poll that raced the history's load) is dropped.
  function add(h, at, values) {
    const n = h.at.length;
    if (n && at <= h.at[n - 1]) return false;
    h.at.push(at);
    for (const key of Object.keys(h)) if (key !== "at") h[key].push(values[key] || 0);
    trim(h, at);
    return true;
  }

  // Columns of /api/levels into a history: names maps a history's series to a column.
  function load(h, columns, names) {
    let n = 0;
    for (let i = 0; i < columns.at.length; i++) {
      const values = {};
      for (const key of Object.keys(names)) values[key] = columns[names[key]][i];
      if (add(h, columns.at[i], values)) n++;
    }
    return n;
  }

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

  function xs(at, width) {
    const first = at[0], span = at[at.length - 1] - first;
    return at.map((t) => (at.length <= 1 || span <= 0 ? width : ((t - first) / span) * width));
  }

  // Draw series ``names`` of ``h`` in ``svg``; its data-* attributes say what it shows
  // (points, how many came from the database, the first and last values).
  function draw(svg, h, names, unit, loaded) {
    if (!svg) return;
    const W = 600, H = 160, top = 8, bottom = 4;
    let max = 0;
    for (const name of names) for (const v of h[name]) max = Math.max(max, v);
    const scale = nice(max);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    for (const f of [0, 0.5, 1]) {
      const y = top + (H - top - bottom) * (1 - f);
      svg.appendChild(el("line", { x1: 0, x2: W, y1: y, y2: y, class: "axis" }));
    }
    const label = el("text", { x: 4, y: top + 10 });
    label.textContent = Number(Math.round(scale * 100) / 100).toLocaleString("en-US") + unit;
    svg.appendChild(label);
    const x = xs(h.at, W);
    for (const name of names) {
      const points = h[name].map((v, i) =>
        x[i].toFixed(1) + "," + (top + (H - top - bottom) * (1 - v / scale)).toFixed(1));
      if (points.length === 1) points.unshift("0," + points[0].split(",")[1]);
      svg.appendChild(el("polyline", { points: points.join(" "), class: "line s-" + name,
                                       "data-series": name }));
    }
    svg.dataset.points = String(h.at.length);
    svg.dataset.history = String(loaded || 0);
    const first = {}, last = {};
    for (const name of names) {
      first[name] = h[name][0];
      last[name] = h[name][h[name].length - 1];
    }
    svg.dataset.first = JSON.stringify(first);
    svg.dataset.last = JSON.stringify(last);
  }

  function sparkline(svg, h) {
    if (!svg || !h) return;
    const max = Math.max(1, ...h.ready);
    const x = xs(h.at, 100);
    const pts = h.ready.map((v, i) => x[i].toFixed(1) + "," + (19 - (v / max) * 18).toFixed(1));
    if (pts.length === 1) pts.unshift("0," + pts[0].split(",")[1]);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.appendChild(el("polyline", { points: pts.join(" ") }));
  }

  // Sent per second between two live points, from the exact sent counter.
  function rater() {
    let last = null;
    return function (at, counter, fallback) {
      let value = fallback || 0;
      if (last !== null && at > last.at) value = Math.max(counter - last.counter, 0) / (at - last.at);
      last = { at: at, counter: counter };
      return value;
    };
  }

  // The depth and throughput charts of the overview and of a queue's page (the macro
  // charts in _macros.html): their history, first the totals /api/levels recorded, then a
  // live point at a time; sentRate turns the exact sent counter into a rate.
  function levels() {
    const h = history(["ready", "in_flight", "dead", "sent", "acked"]);
    let loaded = 0; // points that came from the database
    return {
      history: h,
      sentRate: rater(),
      load: function (totals) {
        loaded = load(h, totals, { ready: "ready", in_flight: "in_flight", dead: "dead",
                                   sent: "sent_per_second", acked: "acked_per_second" });
      },
      add: function (at, values) { return add(h, at, values); },
      draw: function () {
        draw(document.getElementById("chart-depth"), h, ["ready", "in_flight", "dead"], "",
             loaded);
        draw(document.getElementById("chart-rate"), h, ["sent", "acked"], "/s", loaded);
      },
    };
  }

  // Starts the levels charts of a page that holds the element ``id`` (none: nothing to
  // do). ``setup(node, chart)`` gets that element and the page's levels() and returns how
  // the page runs them: ``query``, what narrows the history's /api/levels; ``load(doc)``,
  // which takes that history in; ``live()``, which adds the first live point and arranges
  // the next ones. A history that fails to load is toasted and the live points start
  // anyway; then the body's data-charts says "ready".
  function start(id, setup) {
    const node = document.getElementById(id);
    if (!node) return;
    const page = setup(node, levels());
    (async function () {
      try {
        page.load(await window.hailq.api("GET", "/api/levels?seconds=" + WINDOW + page.query));
      } catch (error) {
        window.hailq.toast("chart history not loaded: " + error.message, true);
      }
      page.live();
      document.body.dataset.charts = "ready";
    })();
  }

  window.hailq.charts = { WINDOW: WINDOW, history: history, add: add, load: load, draw: draw,
                          sparkline: sparkline, rater: rater, levels: levels, start: start };
})();
