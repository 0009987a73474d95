// The charts page: uPlot charts of the samples the page carries as JSON
// (#history-data), drawn when the page loads and again whenever the live
// body is swapped in with new samples.
(function () {
  "use strict";
  const GiB = 1 << 30;
  let drawn = [];

  function series(label, stroke, fill) {
    return { label: label, stroke: stroke, width: 2, fill: fill || undefined };
  }

  function chart(id, samples, lines, values) {
    const el = document.getElementById(id);
    if (!el) return;
    const xs = samples.map((s) => Date.parse(s.at) / 1000);
    const data = [xs].concat(values.map((value) => samples.map(value)));
    const opts = {
      width: Math.max(320, el.clientWidth || 600),
      height: 200,
      series: [{}].concat(lines),
      axes: [{}, { size: 60 }],
      legend: { live: true },
    };
    drawn.push(new uPlot(opts, data, el));
  }

  function draw() {
    drawn.forEach((plot) => plot.destroy());
    drawn = [];
    const source = document.getElementById("history-data");
    if (!source) return;
    const samples = JSON.parse(source.textContent) || [];
    if (samples.length < 2) return;
    chart("chart-cost", samples, [series("fleet $/h", "#2f6feb"), series("LP bound $/h", "#067647")],
      [(s) => s.perHour, (s) => (s.lowerBoundPerHour > 0 ? s.lowerBoundPerHour : null)]);
    chart("chart-cpu", samples, [series("requested", "#2f6feb", "rgba(47,111,235,0.12)"), series("offered", "#667085")],
      [(s) => (s.allocated.milliCpu || 0) / 1000, (s) => (s.allocatable.milliCpu || 0) / 1000]);
    chart("chart-memory", samples, [series("requested", "#2f6feb", "rgba(47,111,235,0.12)"), series("offered", "#667085")],
      [(s) => (s.allocated.memoryBytes || 0) / GiB, (s) => (s.allocatable.memoryBytes || 0) / GiB]);
    chart("chart-pending", samples, [series("pending", "#b54708", "rgba(181,71,8,0.12)")], [(s) => s.pending]);
    chart("chart-heartbeats", samples, [series("p99 ms", "#b42318")],
      [(s) => (s.heartbeats > 0 ? s.heartbeatP99Seconds * 1000 : null)]);
    document.body.dataset.charts = String(drawn.length);
  }

  document.addEventListener("DOMContentLoaded", draw);
  document.body.addEventListener("htmx:afterSwap", draw);
})();
