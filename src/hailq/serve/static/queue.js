// hailq dashboard, a queue's page: its depth and throughput charts, the last hour from
// the database (GET /api/levels?queue=...) and then a point at each refresh of the
// page's parts (the counts the server rendered in #live-tiles).
"use strict";

(function () {
  const box = document.getElementById("queue-charts");
  if (!box) return;
  const hailq = window.hailq;
  const charts = hailq.charts;
  const history = charts.history(["ready", "in_flight", "dead", "sent", "acked"]);
  const sentRate = charts.rater();
  const ackedRate = charts.rater();
  let loaded = 0;

  function last(name) {
    const values = history[name];
    return values.length ? values[values.length - 1] : 0;
  }

  function draw() {
    charts.draw(document.getElementById("chart-depth"), history, ["ready", "in_flight", "dead"],
                "", loaded);
    charts.draw(document.getElementById("chart-rate"), history, ["sent", "acked"], "/s", loaded);
  }

  function point() {
    const tiles = document.getElementById("live-tiles");
    if (!tiles) return;
    const d = tiles.dataset;
    const at = Number(d.at);
    charts.add(history, at, {
      ready: Number(d.ready), in_flight: Number(d.inFlight), dead: Number(d.dead),
      sent: sentRate(at, Number(d.sent), last("sent")),
      acked: ackedRate(at, Number(d.acked), last("acked")) });
    draw();
  }

  async function start() {
    try {
      const doc = await hailq.api("GET", "/api/levels?seconds=" + charts.WINDOW + "&queue="
                                  + encodeURIComponent(box.dataset.queue));
      loaded = charts.load(history, doc.totals, {
        ready: "ready", in_flight: "in_flight", dead: "dead", sent: "sent_per_second",
        acked: "acked_per_second" });
    } catch (error) {
      hailq.toast("chart history not loaded: " + error.message, true);
    }
    point();
    document.body.dataset.charts = "ready";
    document.addEventListener("hailq:refreshed", point);
  }

  start();
})();
