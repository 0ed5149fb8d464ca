// hailq dashboard, a queue's page: its depth and throughput charts, the last hour from
// the database (GET /api/levels?queue=...) and then a point at each refresh of the
// page's parts (the counts the server rendered in #live-tiles).
"use strict";

window.hailq.charts.start("queue-charts", function (box, chart) {
  const ackedRate = window.hailq.charts.rater();

  function last(name) {
    const values = chart.history[name];
    return values.length ? values[values.length - 1] : 0;
  }

  function point() {
    const tiles = document.getElementById("live-tiles");
    if (!tiles) return;
    const d = tiles.dataset;
    const at = Number(d.at);
    chart.add(at, {
      ready: Number(d.ready), in_flight: Number(d.inFlight), dead: Number(d.dead),
      sent: chart.sentRate(at, Number(d.sent), last("sent")),
      acked: ackedRate(at, Number(d.acked), last("acked")) });
    chart.draw();
  }

  return {
    query: "&queue=" + encodeURIComponent(box.dataset.queue),
    load: function (doc) { chart.load(doc.totals); },
    live: function () {
      point();
      document.addEventListener("hailq:refreshed", point);
    },
  };
});
