// The report page's script: draws each plot of the embedded JSON with uPlot (inlined before
// this), marks the bad step and non-finite values, syncs the cursors, wires the copy buttons.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  // "#png": the first plot alone, for `faultline report --png` (report_png.cpp).
  if (window.location.hash === "#png") document.body.classList.add("png");
  var root = document.getElementById("plots");
  var dpr = window.devicePixelRatio || 1;
  var palette = ["#cf222e", "#bc4c00", "#8250df", "#bf3989", "#953800", "#6e7781", "#116329", "#0550ae"];
  var parts = { compute: "#0969da", data: "#bc4c00", comm: "#8250df" };
  var dashes = [[], [6, 3], [2, 2], [8, 3, 2, 3]];
  var sync = uPlot.sync("faultline");

  function fmt(v) {
    if (v == null) return "—";
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(3);
    return String(Number(v.toPrecision(5)));
  }

  function seriesStyle(plot, s, i) {
    var style = { label: s.label, width: 1.6, spanGaps: false, value: function (u, v) { return fmt(v); } };
    if (s.role === "replay") { style.stroke = "#0969da"; style.dash = [5, 3]; }
    else if (s.role === "reference") { style.stroke = "#1a7f37"; style.width = 1.8; }
    else if (s.role === "band_high" || s.role === "band_low") { style.stroke = "rgba(26,127,55,0.35)"; style.width = 1; }
    else if (plot.id === "step_time") {
      var words = s.label.split(" ");
      style.stroke = parts[words[words.length - 1]] || palette[i % palette.length];
      style.dash = dashes[(parseInt(words[1], 10) || 0) % dashes.length];
    } else style.stroke = palette[i % palette.length];
    return style;
  }

  function logScale(plot) {
    if (plot.id !== "grad_norm" && plot.id !== "loss_scale") return false;
    var lo = Infinity, hi = -Infinity;
    plot.series.forEach(function (s) {
      s.values.forEach(function (v) { if (v != null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    });
    return lo > 0 && hi / lo > 1e3;
  }

  // The bad step as a dashed red line, non-finite values as red crosses along the top.
  function drawMarkers(plot) {
    return function (u) {
      var ctx = u.ctx, box = u.bbox;
      ctx.save();
      ctx.fillStyle = ctx.strokeStyle = "#cf222e";
      ctx.font = (11 * dpr) + "px sans-serif";
      if (data.bad_step != null) {
        var x = u.valToPos(data.bad_step, "x", true);
        if (x >= box.left && x <= box.left + box.width) {
          ctx.lineWidth = 1.5 * dpr;
          ctx.setLineDash([6 * dpr, 4 * dpr]);
          ctx.beginPath(); ctx.moveTo(x, box.top); ctx.lineTo(x, box.top + box.height); ctx.stroke();
          ctx.setLineDash([]);
          var nearRight = x > box.left + box.width - 60 * dpr;
          ctx.textAlign = nearRight ? "right" : "left";
          ctx.fillText("step " + data.bad_step, x + (nearRight ? -4 : 4) * dpr, box.top + 12 * dpr);
          ctx.textAlign = "left";
        }
      }
      plot.series.forEach(function (s) {
        s.nonfinite.forEach(function (step) {
          var nx = u.valToPos(step, "x", true);
          if (nx >= box.left && nx <= box.left + box.width) ctx.fillText("✕", nx - 4 * dpr, box.top + 26 * dpr);
        });
      });
      ctx.restore();
    };
  }

  var charts = [];
  data.plots.forEach(function (plot, index) {
    var box = document.createElement("div");
    box.className = "plot" + (index === 0 ? " wide" : "");
    box.id = "plot-" + plot.id;
    var title = document.createElement("h3");
    title.textContent = plot.title;
    if (plot.unit) {
      var unit = document.createElement("span");
      unit.className = "unit";
      unit.textContent = " (" + plot.unit + ")";
      title.appendChild(unit);
    }
    box.appendChild(title);
    root.appendChild(box);
    var series = [{ label: "step", value: function (u, v) { return v == null ? "—" : String(v); } }];
    var bandHigh = -1, bandLow = -1;
    plot.series.forEach(function (s, i) {
      series.push(seriesStyle(plot, s, i));
      if (s.role === "band_high") bandHigh = i + 1;
      if (s.role === "band_low") bandLow = i + 1;
    });
    var opts = {
      width: Math.max(300, box.clientWidth - 20),
      height: index === 0 ? 300 : 220,
      cursor: { sync: { key: sync.key }, drag: { x: true, y: false } },
      scales: { x: { time: false }, y: logScale(plot) ? { distr: 3 } : {} },
      axes: [
        { label: "step", stroke: "#656d76", grid: { stroke: "#eaeef2" } },
        { stroke: "#656d76", grid: { stroke: "#eaeef2" }, size: 64,
          values: function (u, vals) { return vals.map(fmt); } }
      ],
      series: series,
      hooks: { draw: [drawMarkers(plot)] }
    };
    if (bandHigh > 0 && bandLow > 0)
      opts.bands = [{ series: [bandHigh, bandLow], fill: "rgba(26,127,55,0.12)" }];
    var columns = [plot.x].concat(plot.series.map(function (s) { return s.values; }));
    charts.push({ chart: new uPlot(opts, columns, box), box: box });
  });
  root.setAttribute("data-rendered", String(charts.length));

  var pending = null;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      charts.forEach(function (c) { c.chart.setSize({ width: Math.max(300, c.box.clientWidth - 20), height: c.chart.height }); });
    }, 100);
  });

  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy"));
      var done = function () { button.textContent = "Copied"; setTimeout(function () { button.textContent = "Copy"; }, 1500); };
      var select = function () {
        var range = document.createRange();
        range.selectNodeContents(source);
        var selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
      };
      if (navigator.clipboard) navigator.clipboard.writeText(source.textContent).then(done, select);
      else select();
    });
  });
})();
