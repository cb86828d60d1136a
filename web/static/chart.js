/* labd web UI: bar charts of CPU and GPU hours, drawn by uPlot (npm "uplot", served from
 * /static/vendor/uplot/). Each chart comes with a table of the same numbers, for screen
 * readers and for anyone who wants the figures rather than the bars.
 * Loaded after common.js and uPlot.iife.min.js; adds labd.hoursChart, labd.lineChart for a
 * training job's metric over time, and labd.scatterChart for a tuning job's objective against
 * one parameter. */
(function () {
  "use strict";

  var L = window.labd;
  var COLORS = { cpu: "#2563eb", gpu: "#d97706" };

  function hours(seconds) {
    return Math.round((Number(seconds) || 0) / 36) / 100; /* 2 decimals */
  }

  /* The width the chart may take: its box, less nothing; never under 240 px. */
  function widthOf(box) {
    return Math.max(240, Math.floor(box.clientWidth || 0));
  }

  function tableFor(caption, keyTitle, rows) {
    var body = rows.map(function (r) {
      return L.el("tr", null, [
        L.el("th", { scope: "row" }, [r.key]),
        L.el("td", { className: "num" }, [hours(r.cpu_s).toFixed(2)]),
        L.el("td", { className: "num" }, [hours(r.gpu_s).toFixed(2)]),
      ]);
    });
    if (!rows.length) body = [L.el("tr", null, [L.el("td", { colSpan: 3, className: "empty" }, ["No usage in this window."])])];
    return L.el("table", { className: "chart-table" }, [
      L.el("caption", null, [caption]),
      L.el("thead", null, [
        L.el("tr", null, [
          L.el("th", { scope: "col" }, [keyTitle]),
          L.el("th", { scope: "col", className: "num" }, ["CPU hours"]),
          L.el("th", { scope: "col", className: "num" }, ["GPU hours"]),
        ]),
      ]),
      L.el("tbody", null, body),
    ]);
  }

  /* Draws rows [{key, cpu_s, gpu_s}] as CPU and GPU hour bars side by side into box
   * (emptied first), with a data table under a <details>. opts: {title, keyTitle, name}.
   * Returns the uPlot instance, or null when uPlot is not loaded (the table still shows). */
  function hoursChart(box, rows, opts) {
    box.textContent = "";
    box.dataset.points = String(rows.length);
    var plot = L.el("div", {
      className: "chart-plot",
      attrs: {
        role: "img",
        "aria-label":
          opts.title + ": " + rows.length + " " + (rows.length === 1 ? "bar group" : "bar groups") +
          ", figures in the table below",
      },
    });
    var details = L.el("details", { className: "chart-details" }, [
      L.el("summary", null, ["Show the figures"]),
      tableFor(opts.title, opts.keyTitle, rows),
    ]);
    box.appendChild(plot);
    box.appendChild(details);
    if (!window.uPlot) {
      plot.appendChild(L.el("p", { className: "muted small" }, ["The chart library did not load; the figures are below."]));
      details.open = true;
      return null;
    }
    var xs = rows.map(function (_, i) {
      return i;
    });
    var bars = window.uPlot.paths.bars;
    var u = new window.uPlot(
      {
        width: widthOf(box),
        height: 220,
        scales: { x: { time: false, range: [-0.5, Math.max(0.5, rows.length - 0.5)] }, y: { range: [0, null] } },
        axes: [
          {
            values: function (self, ticks) {
              /* Every step-th label, so that labels about 46 px wide never overlap. */
              var plotWidth = self.bbox.width / (window.devicePixelRatio || 1);
              var step = Math.max(1, Math.ceil((rows.length * 46) / Math.max(1, plotWidth)));
              return ticks.map(function (t) {
                if (t % step !== 0) return "";
                /* "2026-12-03" reads as "12-03" under a bar; the table has the full key */
                var key = rows[t] && Number.isInteger(t) ? rows[t].key : "";
                return /^\d{4}-\d\d-\d\d$/.test(key) ? key.slice(5) : key;
              });
            },
            splits: function () {
              return xs;
            },
          },
          { label: "hours", size: 50 },
        ],
        series: [
          { label: opts.keyTitle },
          { label: "CPU hours", fill: COLORS.cpu, stroke: COLORS.cpu, paths: bars({ size: [0.35, 40], align: -1 }), points: { show: false } },
          { label: "GPU hours", fill: COLORS.gpu, stroke: COLORS.gpu, paths: bars({ size: [0.35, 40], align: 1 }), points: { show: false } },
        ],
        legend: { show: true, live: false },
        cursor: { drag: { x: false, y: false } },
      },
      [
        xs,
        rows.map(function (r) {
          return hours(r.cpu_s);
        }),
        rows.map(function (r) {
          return hours(r.gpu_s);
        }),
      ],
      plot
    );
    /* Follow the box's width (window resized, phone turned). */
    if (window.ResizeObserver) {
      new ResizeObserver(function () {
        var w = widthOf(box);
        if (w !== u.width) u.setSize({ width: w, height: 220 });
      }).observe(box);
    }
    return u;
  }

  /* One metric over time (points [{at: ISO, value}]) as a line with its points, in box.
   * Returns {update(points)}: a live job's plot is redrawn in place. box.dataset.points says
   * how many points are drawn; the figures are in a table under a <details>. */
  function lineChart(box, name, points) {
    box.textContent = "";
    var plot = L.el("div", { className: "chart-plot", attrs: { role: "img" } });
    var tbody = L.el("tbody");
    var details = L.el("details", { className: "chart-details" }, [
      L.el("summary", null, ["Show the figures"]),
      L.el("table", { className: "chart-table" }, [
        L.el("caption", null, [name]),
        L.el("thead", null, [
          L.el("tr", null, [
            L.el("th", { scope: "col" }, ["At"]),
            L.el("th", { scope: "col", className: "num" }, [name]),
          ]),
        ]),
        tbody,
      ]),
    ]);
    box.appendChild(L.el("h3", null, [name]));
    box.appendChild(plot);
    box.appendChild(details);
    var u = null;

    function columns(pts) {
      return [
        pts.map(function (p) {
          return Date.parse(p.at) / 1000;
        }),
        pts.map(function (p) {
          return Number(p.value);
        }),
      ];
    }

    function update(pts) {
      box.dataset.points = String(pts.length);
      plot.setAttribute("aria-label", name + " over time: " + pts.length + (pts.length === 1 ? " point" : " points") +
        ", figures in the table below");
      tbody.textContent = "";
      pts.forEach(function (p) {
        tbody.appendChild(L.el("tr", null, [
          L.el("td", null, [new Date(p.at).toLocaleTimeString()]),
          L.el("td", { className: "num" }, [String(p.value)]),
        ]));
      });
      if (!window.uPlot) return;
      if (u) {
        u.setData(columns(pts));
        return;
      }
      u = new window.uPlot(
        {
          width: widthOf(box),
          height: 200,
          scales: { x: { time: true } },
          axes: [{}, { size: 60 }],
          series: [
            { label: "time" },
            { label: name, stroke: COLORS.cpu, width: 2, points: { show: true, size: 6, fill: COLORS.cpu } },
          ],
          legend: { show: true, live: true },
          cursor: { drag: { x: false, y: false } },
        },
        columns(pts),
        plot
      );
      if (window.ResizeObserver) {
        new ResizeObserver(function () {
          var w = widthOf(box);
          if (w !== u.width) u.setSize({ width: w, height: 200 });
        }).observe(box);
      }
    }

    if (!window.uPlot) {
      plot.appendChild(L.el("p", { className: "muted small" }, ["The chart library did not load; the figures are below."]));
      details.open = true;
    }
    update(points);
    return { update: update };
  }

  /* Points [{x, y, label}] as dots (no line) against a numeric x, in box: a tuning job's
   * objective against one parameter. opts: {title, xName, yName, logX}. The figures are in
   * a table under a <details>; box.dataset.points says how many are drawn. */
  function scatterChart(box, points, opts) {
    box.textContent = "";
    box.dataset.points = String(points.length);
    var sorted = points.slice().sort(function (a, b) {
      return a.x - b.x;
    });
    var plot = L.el("div", {
      className: "chart-plot",
      attrs: { role: "img", "aria-label": opts.title + ": " + points.length + (points.length === 1 ? " point" : " points") + ", figures in the table below" },
    });
    var details = L.el("details", { className: "chart-details" }, [
      L.el("summary", null, ["Show the figures"]),
      L.el("table", { className: "chart-table" }, [
        L.el("caption", null, [opts.title]),
        L.el("thead", null, [
          L.el("tr", null, [
            L.el("th", { scope: "col" }, [opts.xName]),
            L.el("th", { scope: "col", className: "num" }, [opts.yName]),
            L.el("th", { scope: "col" }, ["Trial"]),
          ]),
        ]),
        L.el("tbody", null, sorted.map(function (p) {
          return L.el("tr", null, [
            L.el("td", null, [String(p.x)]),
            L.el("td", { className: "num" }, [String(p.y)]),
            L.el("td", null, [p.label || ""]),
          ]);
        })),
      ]),
    ]);
    box.appendChild(L.el("h3", null, [opts.title]));
    box.appendChild(plot);
    box.appendChild(details);
    if (!window.uPlot) {
      plot.appendChild(L.el("p", { className: "muted small" }, ["The chart library did not load; the figures are below."]));
      details.open = true;
      return null;
    }
    var u = new window.uPlot(
      {
        width: widthOf(box),
        height: 200,
        scales: { x: { time: false, distr: opts.logX ? 3 : 1 } },
        axes: [{ label: opts.xName }, { size: 60 }],
        series: [
          { label: opts.xName },
          { label: opts.yName, stroke: COLORS.gpu, width: 0, paths: function () { return null; },
            points: { show: true, size: 7, fill: COLORS.gpu } },
        ],
        legend: { show: true, live: true },
        cursor: { drag: { x: false, y: false } },
      },
      [sorted.map(function (p) { return p.x; }), sorted.map(function (p) { return p.y; })],
      plot
    );
    return u;
  }

  L.hoursChart = hoursChart;
  L.lineChart = lineChart;
  L.scatterChart = scatterChart;
  L.hours = hours;
})();
