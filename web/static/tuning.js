/* labd tuning job page (/tuning/{id}): one tuning job — its search (strategy, objective,
 * ranges), the trials table (parameters, objective, status, time; each trial's job linked),
 * the best trial, the objective over time and against each parameter (chart.js), and Stop
 * while it is in progress. Read every few seconds while live, once after it ended. */
(function () {
  "use strict";

  var L = window.labd;
  var J = L.jobs;
  var $ = function (id) {
    return document.getElementById(id);
  };

  var POLL_MS = 2000;
  var match = /^\/tuning\/(\d+)\/?$/.exec(window.location.pathname);
  var ID = match ? match[1] : null;
  var page = { t: null, timer: null, drawn: "" };

  function live(t) {
    return t.status === "InProgress" || t.status === "Stopping";
  }

  function value(v) {
    if (v === null || v === undefined) return "—";
    return typeof v === "number" ? String(Math.round(v * 1e6) / 1e6) : String(v);
  }

  function span(tr) {
    if (!tr.started_at) return "—";
    var end = tr.ended_at ? Date.parse(tr.ended_at) : Date.now();
    return L.duration(Math.max(0, Math.round((end - Date.parse(tr.started_at)) / 1000)));
  }

  function rangeText(r) {
    if (r.type === "categorical") return r.name + " ∈ {" + r.values.join(", ") + "}";
    return r.name + " " + r.type + " " + r.min + " … " + r.max + (r.scaling === "log" ? " (log)" : "") +
      (r.grid_points ? ", " + r.grid_points + " points" : "");
  }

  function renderSummary(t) {
    $("tuning-name").textContent = t.name;
    $("tuning-status").textContent = t.status;
    $("tuning-status").className = J.statusClass(t.status);
    $("tuning-strategy").textContent = t.strategy + (t.hyperband ? " (early stopping: rungs at " +
      t.hyperband.min_points + " × " + t.hyperband.reduction_factor + "ⁿ points)" : "");
    $("tuning-objective").textContent = t.objective.type + " " + t.objective.metric;
    var c = t.trial_counts;
    $("tuning-counts").textContent = t.trials.length + " of " + t.max_trials + " made: " +
      Object.keys(c).filter(function (k) { return c[k]; }).map(function (k) { return c[k] + " " + k; }).join(", ");
    $("tuning-parallel").textContent = String(t.max_parallel);
    $("tuning-created").textContent = L.formatTime(t.created_at);
    $("tuning-ended").textContent = t.ended_at ? L.formatTime(t.ended_at) : "—";
    $("tuning-ranges").textContent = t.parameter_ranges.map(rangeText).join("; ");
    L.showMessage("tuning-reason", t.reason || "");
    $("tuning-stop").hidden = t.status !== "InProgress";
  }

  function trialJob(tr) {
    return tr.job_id ? L.el("a", { href: "/jobs/" + encodeURIComponent(tr.job_id) }, [tr.job_name]) : tr.job_name;
  }

  function renderBest(t) {
    var b = t.best_trial;
    var box = $("best-trial");
    box.textContent = "";
    box.className = b ? "" : "muted";
    if (!b) {
      box.textContent = "None yet: the best is the completed trial with the best objective.";
      return;
    }
    box.dataset.index = String(b.index);
    box.appendChild(L.el("strong", null, ["Trial #" + b.index + ": " + t.objective.metric + " " + value(b.objective)]));
    box.appendChild(document.createTextNode(" with " + Object.keys(b.parameters).map(function (k) {
      return k + " = " + value(b.parameters[k]);
    }).join(", ") + " — "));
    box.appendChild(trialJob(b));
  }

  function renderTrials(t) {
    var names = t.parameter_ranges.map(function (r) { return r.name; });
    var head = $("trials-head");
    head.textContent = "";
    ["#", "Job"].concat(names, ["Status", "Objective", "Started", "Time"]).forEach(function (h, i) {
      head.appendChild(L.el("th", { scope: "col", className: h === "Objective" || (i >= 2 && i < 2 + names.length) ? "num" : "" }, [h]));
    });
    var tbody = $("trials").tBodies[0];
    tbody.textContent = "";
    if (!t.trials.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 6 + names.length, className: "empty" }, ["No trials yet."])]));
      return;
    }
    t.trials.forEach(function (tr) {
      var best = t.best_trial && t.best_trial.index === tr.index;
      tbody.appendChild(L.el("tr", { dataset: { index: String(tr.index), status: tr.status }, className: best ? "best" : "" }, [
        L.el("td", null, [String(tr.index) + (best ? " ★" : "")]),
        L.el("td", null, [trialJob(tr)]),
      ].concat(names.map(function (n) {
        return L.el("td", { className: "num" }, [value(tr.parameters[n])]);
      }), [
        L.el("td", { attrs: { title: tr.reason || "" } }, [L.el("span", { className: J.statusClass(tr.status) }, [tr.status])]),
        L.el("td", { className: "num" }, [value(tr.objective)]),
        L.el("td", null, [tr.started_at ? J.timeOf(tr.started_at) : "—"]),
        L.el("td", null, [span(tr)]),
      ])));
    });
  }

  function renderPlots(t) {
    var done = t.trials.filter(function (tr) {
      return tr.objective !== null && (tr.ended_at || tr.status === "EarlyStopped");
    });
    $("plots-empty").hidden = done.length > 0;
    if (!done.length) return;
    var overTime = done.filter(function (tr) { return tr.ended_at; }).sort(function (a, b) {
      return Date.parse(a.ended_at) - Date.parse(b.ended_at);
    }).map(function (tr) {
      return { at: tr.ended_at, value: tr.objective };
    });
    L.lineChart($("objective-time"), t.objective.metric + " of each trial as it ended", overTime);
    var box = $("objective-params");
    box.textContent = "";
    t.parameter_ranges.forEach(function (r) {
      var numeric = r.type !== "categorical";
      var pts = done.map(function (tr) {
        var x = tr.parameters[r.name];
        return { x: numeric ? Number(x) : r.values.indexOf(String(x)), y: tr.objective, label: "#" + tr.index };
      });
      var one = L.el("div", { className: "metric-plot", dataset: { param: r.name } });
      box.appendChild(one);
      L.scatterChart(one, pts, {
        title: t.objective.metric + " against " + r.name + (numeric ? "" : " (" + r.values.join(", ") + ")"),
        xName: r.name, yName: t.objective.metric, logX: numeric && r.scaling === "log",
      });
    });
  }

  function render(t) {
    page.t = t;
    renderSummary(t);
    var text = JSON.stringify([t.trials, t.best_trial]);
    if (text === page.drawn) return;
    page.drawn = text;
    renderBest(t);
    renderTrials(t);
    renderPlots(t);
  }

  function load() {
    return L.api("GET", "/tuning-jobs/" + ID).then(function (t) {
      render(t);
      clearTimeout(page.timer);
      if (live(t)) page.timer = setTimeout(function () { load().catch(showPageError); }, POLL_MS);
      return t;
    });
  }

  function showPageError(err) {
    L.showMessage("page-error", L.errorText(err));
  }

  function onStop() {
    if (!window.confirm("Stop tuning job " + page.t.name + "? Its running trials are stopped and no more are made.")) return;
    $("tuning-stop").disabled = true;
    L.api("POST", "/tuning-jobs/" + ID + "/stop")
      .then(load)
      .catch(showPageError)
      .then(function () {
        $("tuning-stop").disabled = false;
      });
  }

  function init() {
    $("tuning-stop").addEventListener("click", onStop);
    if (!ID) {
      showPageError({ message: "This is not a tuning job's address." });
      return;
    }
    L.loadMe().then(load).catch(function (err) {
      if (err && err.status === 404) err = { message: "There is no tuning job #" + ID + " of yours." };
      $("tuning-status").textContent = "not found";
      showPageError(err);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
