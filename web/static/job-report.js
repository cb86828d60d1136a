/* labd profiler report (/jobs/{id}/report): one job's profiling rules in a printable page —
 * the summary (every rule and its status), what to do about each finding, CPU, GPU, memory
 * and I/O over time (chart.js's lineChart, one plot per reading) with their percentiles after
 * the warm-up, and the histogram of the job's step-time metric. Everything comes from
 * GET /api/v1/jobs/{id}/report, read once (a running job's report is read again on reload). */
(function () {
  "use strict";

  var L = window.labd;
  var J = L.jobs;
  var $ = function (id) {
    return document.getElementById(id);
  };

  var match = /^\/jobs\/(\d+)\/report\/?$/.exec(window.location.pathname);
  var JOB_ID = match ? match[1] : null;
  var MIB = 1048576;

  var STATUS_TEXT = {
    IssuesFound: "Issues found",
    NoIssuesFound: "No issues found",
    InProgress: "In progress",
    NotApplicable: "Not applicable (a CPU job)",
  };
  var STATUS_CLASS = {
    IssuesFound: "badge state-failed",
    NoIssuesFound: "badge state-completed",
    InProgress: "badge state-running",
    NotApplicable: "badge state-stopped",
  };

  /* The readings plotted and tabled: key, title, and how a value reads. */
  var READINGS = [
    { key: "cpu_percent", title: "CPU (% of the job's CPUs)", scale: 1, unit: " %" },
    { key: "gpu_percent", title: "GPU utilisation (%)", scale: 1, unit: " %" },
    { key: "io_wait_percent", title: "I/O wait (% of wall time)", scale: 1, unit: " %" },
    { key: "memory_bytes", title: "Memory (MiB)", scale: MIB, unit: " MiB" },
    { key: "gpu_memory_bytes", title: "GPU memory (MiB)", scale: MIB, unit: " MiB" },
  ];

  function round(v) {
    return Math.round(v * 10) / 10;
  }

  function renderSummary(rep) {
    var found = rep.rules.filter(function (r) {
      return r.status === "IssuesFound";
    });
    $("report-verdict").textContent = found.length
      ? found.length + (found.length === 1 ? " rule found an issue: " : " rules found issues: ") +
        found.map(function (r) {
          return r.rule;
        }).join(", ") + "."
      : "No rule found an issue.";
    $("report-warmup").textContent =
      "Warm-up: the first " + rep.warmup_s + " s of each run (" +
      (rep.warmup_from === "job" ? "the job's rules.warmup_s" : "labd's default, [jobs] rules_warmup") +
      ") is not judged by the rules marked ‡: start-up is not the steady state. " +
      rep.warmup_samples + " of " + rep.samples.length + " samples fell in it.";
    var tbody = $("report-rules").tBodies[0];
    tbody.textContent = "";
    rep.rules.forEach(function (r) {
      tbody.appendChild(L.el("tr", { dataset: { rule: r.rule, status: r.status } }, [
        L.el("th", { scope: "row" }, [r.rule + (r.skips_warmup ? " ‡" : "")]),
        L.el("td", null, [r.description]),
        L.el("td", null, [L.el("span", { className: STATUS_CLASS[r.status] || "badge" }, [STATUS_TEXT[r.status] || r.status])]),
      ]));
    });
  }

  function renderFindings(rep) {
    var ol = $("report-findings");
    var found = rep.rules.filter(function (r) {
      return r.finding;
    });
    ol.textContent = "";
    $("report-findings-empty").hidden = found.length > 0;
    found.forEach(function (r) {
      var f = r.finding;
      ol.appendChild(L.el("li", { dataset: { rule: r.rule } }, [
        L.el("strong", null, [r.rule]),
        L.el("p", null, [f.message]),
        L.el("p", { className: "muted small" }, ["From " + J.timeOf(f.first_at) + " to " + J.timeOf(f.last_at) +
          ", " + (f.samples || []).length + ((f.samples || []).length === 1 ? " reading" : " readings") + " cited"]),
        L.el("p", { className: "finding-advice" }, [L.el("strong", null, ["What to do: "]), r.recommendation]),
      ]));
    });
  }

  function renderUsage(rep) {
    var tbody = $("report-usage").tBodies[0];
    tbody.textContent = "";
    READINGS.forEach(function (r) {
      var s = rep.usage[r.key];
      var cells = s
        ? ["p5", "p50", "p95", "max"].map(function (p) {
            return L.el("td", { className: "num" }, [round(s[p] / r.scale) + r.unit]);
          })
        : [L.el("td", { colSpan: 4, className: "empty" }, ["not read (or only in the warm-up)"])];
      tbody.appendChild(L.el("tr", { dataset: { reading: r.key } }, [L.el("th", { scope: "row" }, [r.title])].concat(cells)));
    });
    var plots = $("report-plots");
    plots.textContent = "";
    $("report-samples-empty").hidden = rep.samples.length > 0;
    READINGS.forEach(function (r) {
      var points = rep.samples
        .filter(function (s) {
          return s[r.key] !== null && s[r.key] !== undefined;
        })
        .map(function (s) {
          return { at: s.at, value: round(s[r.key] / r.scale) };
        });
      if (!points.length) return;
      var box = L.el("div", { className: "metric-plot", dataset: { reading: r.key } });
      plots.appendChild(box);
      L.lineChart(box, r.title, points);
    });
  }

  function renderSteps(rep) {
    var st = rep.step_times;
    var table = $("report-histogram");
    var note = $("report-steps-note");
    if (!st.count) {
      table.hidden = true;
      note.textContent = "This job has no step-time metric: no points of a metric named \"" + st.metric + "\"" +
        (st.warmup_count ? " after the warm-up (" + st.warmup_count + " in it)" : "") +
        ". Print a step's duration in the log, define it in metric_definitions and name it in the job's " +
        "rules.step_metric (or call it step_time) to see its histogram here.";
      return;
    }
    note.textContent = st.count + " steps of the metric \"" + st.metric + "\" after the warm-up (" +
      st.warmup_count + " in it left out): p50 " + st.spread.p50 + ", p95 " + st.spread.p95 + ", max " + st.spread.max + ".";
    var most = Math.max.apply(null, st.histogram.map(function (b) {
      return b.count;
    }));
    var tbody = table.tBodies[0];
    tbody.textContent = "";
    st.histogram.forEach(function (b) {
      var bar = L.el("span", { className: "bar" });
      /* a bar of one step among thousands still shows; an empty bar none */
      bar.style.width = (b.count ? Math.max(1, (100 * b.count) / most) : 0) + "%";
      tbody.appendChild(L.el("tr", null, [
        L.el("th", { scope: "row" }, [Number(b.from.toPrecision(4)) + " – " + Number(b.to.toPrecision(4))]),
        L.el("td", { className: "num" }, [String(b.count)]),
        L.el("td", { className: "bar-cell", attrs: { "aria-hidden": "true" } }, [bar]),
      ]));
    });
    table.hidden = false;
  }

  function render(rep) {
    document.title = "Profiler report · " + rep.name + " · labd";
    $("report-name").textContent = rep.name;
    var badge = $("report-status");
    badge.textContent = rep.status;
    badge.className = J.statusClass(rep.status);
    badge.dataset.status = rep.status;
    $("report-live").hidden = rep.status !== "InProgress";
    renderSummary(rep);
    renderFindings(rep);
    renderUsage(rep);
    renderSteps(rep);
    document.body.dataset.loaded = "true";
  }

  function init() {
    $("report-print").addEventListener("click", function () {
      window.print();
    });
    if (!JOB_ID) {
      L.showMessage("page-error", "This is not a job report's address.");
      return;
    }
    $("report-job-link").href = "/jobs/" + JOB_ID;
    L.loadMe()
      .then(function () {
        return L.api("GET", "/jobs/" + JOB_ID + "/report");
      })
      .then(render)
      .catch(function (err) {
        if (err && err.status === 404) err = { message: "There is no job #" + JOB_ID + " of yours." };
        $("report-status").textContent = "not found";
        L.showMessage("page-error", L.errorText(err));
      });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
