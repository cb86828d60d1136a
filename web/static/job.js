/* labd job page (/jobs/{id}): one training job — status and phase timeline, billable time,
 * warm pool (Release), Stop while live, the live log (SSE, resumed after a reconnect),
 * one uPlot plot per metric, final metrics, rule findings and where the outputs are.
 * The job's own status stream (/jobs/{id}/events) drives the page while the job is live;
 * after it ends everything is read once, so a page opened later shows the same. */
(function () {
  "use strict";

  var L = window.labd;
  var J = L.jobs;
  var $ = function (id) {
    return document.getElementById(id);
  };

  var METRICS_POLL_MS = 2000;
  var POLL_MS = 2000; /* the job read while its status stream is not live */
  var RECONNECT_MS = 2000;
  var match = /^\/jobs\/(\d+)\/?$/.exec(window.location.pathname);
  var JOB_ID = match ? match[1] : null;
  var BASE = "/api/v1/jobs/" + JOB_ID;

  var page = {
    job: null,
    events: null, /* labd.follow of the status stream */
    log: null, /* labd.follow of the log */
    logOffset: null, /* byte offset after the last log line shown (the SSE id) */
    plots: {}, /* metric name -> lineChart */
    metricsTimer: null,
    ended: false, /* the status stream said end: the job read after it is final */
  };

  /* ---- the job ---------------------------------------------------------------------- */

  function setText(id, text) {
    $(id).textContent = text === null || text === undefined || text === "" ? "—" : String(text);
  }

  /* "start → end (duration)"; the phase under way "start → now"; the final status of an
   * ended job (which has no end) just its time. */
  function phaseTimes(t, live) {
    if (t.end_at) {
      var span = (Date.parse(t.end_at) - Date.parse(t.start_at)) / 1000;
      return J.timeOf(t.start_at) + " → " + J.timeOf(t.end_at) + " (" + L.duration(span) + ")";
    }
    return J.timeOf(t.start_at) + (live ? " → now" : "");
  }

  function renderTimeline(transitions, live) {
    var ol = $("job-timeline");
    ol.textContent = "";
    (transitions || []).forEach(function (t) {
      ol.appendChild(
        L.el("li", { dataset: { status: t.status }, className: t.end_at || !live ? "" : "current" }, [
          L.el("strong", null, [t.status]),
          " ",
          L.el("span", { className: "muted small" }, [phaseTimes(t, live)]),
          t.message ? L.el("span", { className: "block small" }, [t.message]) : null,
        ])
      );
    });
  }

  function renderWarm(job) {
    var pool = job.warm_pool;
    var text = "No warm pool: this job's sandbox ends with it.";
    if (pool) {
      text = "Pool #" + pool.id + ": " + J.warmText(pool);
      if (pool.warm_s) text += "; kept warm " + L.duration(pool.warm_s);
      if (pool.reused_by) text += "; reused by job #" + pool.reused_by;
      if (pool.reason) text += " — " + pool.reason;
    } else if (job.keep_alive_s) {
      text = "Kept warm for " + L.duration(job.keep_alive_s) + " after the job ends.";
    }
    $("job-warm").textContent = text;
    $("warm-release").hidden = !(pool && pool.status === "Available");
  }

  function renderOutputs(job) {
    var out = job.output_path || "";
    setText("out-path", out);
    setText("out-model", out && out + "/model");
    setText("out-output", out && out + "/output");
    setText("out-checkpoints", job.checkpoint_path);
    setText("out-log", out && out + "/log.txt");
  }

  function renderFinal(finals) {
    var tbody = $("final-metrics").tBodies[0];
    if (!finals || !finals.length) return;
    tbody.textContent = "";
    finals.forEach(function (m) {
      tbody.appendChild(
        L.el("tr", { dataset: { metric: m.name } }, [
          L.el("td", null, [m.name]),
          L.el("td", { className: "num" }, [String(m.value)]),
          L.el("td", null, [J.timeOf(m.at)]),
        ])
      );
    });
  }

  /* The definitions labd stopped applying (their regex kept hitting PCRE2's match limit),
   * and whether an ended job's metrics are final yet (docs/jobs.md "Metrics"). */
  function renderExtraction(data) {
    var dropped = (data && data.dropped_metrics) || [];
    var over = page.job && !J.isLive(page.job);
    L.showMessage(
      "metrics-dropped",
      dropped.length
        ? "Metric definitions dropped: " +
            dropped.map(function (d) { return d.name; }).join(", ") +
            ". Their regex hit PCRE2's match limit on line after line, so labd no longer applies " +
            "them to this job's log. Simplify the regex (no nested repetition such as (a|aa)+) " +
            "and submit again."
        : ""
    );
    $("metrics-reading").hidden = !(over && data && data.metrics_complete === false);
  }

  function sampleTable(samples) {
    if (!samples || !samples.length) return L.el("p", { className: "muted small" }, ["No samples kept."]);
    if (typeof samples[0] !== "object" || samples[0] === null) {
      return L.el("pre", { className: "small" }, [JSON.stringify(samples)]);
    }
    var keys = Object.keys(samples[0]);
    return L.el("table", { className: "chart-table" }, [
      L.el("thead", null, [L.el("tr", null, keys.map(function (k) {
        return L.el("th", { scope: "col" }, [k]);
      }))]),
      L.el("tbody", null, samples.map(function (s) {
        return L.el("tr", null, keys.map(function (k) {
          var v = s[k];
          return L.el("td", null, [typeof v === "object" ? JSON.stringify(v) : String(v)]);
        }));
      })),
    ]);
  }

  function renderFindings(findings) {
    var ul = $("findings");
    ul.textContent = "";
    $("findings-empty").hidden = !!(findings && findings.length);
    (findings || []).forEach(function (f) {
      ul.appendChild(
        L.el("li", { dataset: { rule: f.rule } }, [
          L.el("strong", null, [f.rule]),
          " ",
          L.el("span", { className: "badge state-failed" }, [f.status || "IssuesFound"]),
          L.el("p", null, [f.message || ""]),
          L.el("p", { className: "muted small" }, ["From " + J.timeOf(f.first_at) + " to " + J.timeOf(f.last_at)]),
          L.el("details", null, [
            L.el("summary", null, ["The samples that triggered it (" + ((f.samples || []).length) + ")"]),
            L.el("div", { className: "table-wrap" }, [sampleTable(f.samples)]),
          ]),
        ])
      );
    });
  }

  function render(job) {
    page.job = job;
    document.title = "Job " + job.name + " · labd";
    $("job-name").textContent = job.name;
    var badge = $("job-status");
    badge.textContent = J.statusText(job);
    badge.className = J.statusClass(job.status);
    badge.dataset.status = job.status;
    $("job-command").textContent = JSON.stringify(job.command || []);
    /* a script job's command is labd's launcher: the script is what the user wrote */
    $("job-command-row").hidden = !!job.script;
    $("job-script-row").hidden = !job.script;
    $("job-script").textContent = job.script || "";
    /* which of the host's GPUs it binds, once its pool holds them */
    var bound = Array.isArray(job.gpus) && job.gpus.length ? " (GPUs " + job.gpus.join(", ") + ")" : "";
    setText("job-type", job.type === "gpu" ? "GPU × " + job.gpu_count + bound : "CPU");
    setText("job-created", J.timeOf(job.created_at));
    setText("job-started", J.timeOf(job.started_at));
    setText("job-ended", J.timeOf(job.ended_at));
    setText("job-billable", L.duration(job.billable_s || 0));
    setText("job-training", L.duration(job.training_s || 0));
    setText("job-attempt", (job.attempt || 1) + " of " + ((job.max_retries || 0) + 1));
    setText("job-exit", job.exit_code);
    L.showMessage("job-failure", job.failure_reason ? "Why it failed: " + job.failure_reason : "");
    /* a share of a card over its GPU memory budget, or its processes ended for it */
    L.showMessage("job-gpu-notice", job.gpu_notice ? String(job.gpu_notice) : "");
    /* the reason is usually in the last lines the command wrote (text, never markup) */
    $("job-failure-tail").hidden = !job.failure_tail;
    $("job-failure-tail-text").textContent = job.failure_tail || "";
    $("job-stop").hidden = job.status !== "InProgress";
    renderWarm(job);
    L.jobInterruptions.render(job);
    renderTimeline(job.transitions, J.isLive(job));
    renderOutputs(job);
    renderFinal(job.final_metrics);
    renderExtraction(job);
    if (job.findings) renderFindings(job.findings);
  }

  /* A read that set out before the end may come back after it: a live job is then old news. */
  function loadJob() {
    return L.api("GET", "/jobs/" + JOB_ID).then(function (job) {
      if (!(page.ended && J.isLive(job))) render(job);
    });
  }

  /* ---- live status -------------------------------------------------------------------- */

  function onEnd() {
    page.ended = true;
    if (page.events) page.events.close();
    clearTimeout(page.metricsTimer);
    /* the final record: final metrics and findings come with the ended job */
    loadJob().then(loadMetrics).catch(showPageError);
  }

  /* The job's status stream; while it is not live the job is read every few seconds,
   * until it is over. */
  function openEvents() {
    page.events = L.follow(BASE + "/events", {
      status: function (job) {
        if (job && typeof job === "object") render(job);
      },
      end: onEnd,
    }, {
      poll: function () {
        return loadJob().then(function () {
          if (!J.isLive(page.job)) onEnd();
          return POLL_MS;
        });
      },
      retryMs: RECONNECT_MS,
    });
  }

  /* ---- log ------------------------------------------------------------------------------ */

  function appendLog(text) {
    var pre = $("job-log");
    var atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 40;
    pre.appendChild(document.createTextNode(text));
    if ($("log-follow").checked || atEnd) pre.scrollTop = pre.scrollHeight;
  }

  /* The log as it grows: the browser resumes a dropped stream with Last-Event-ID; a stream
   * opened again goes on from the last offset shown. */
  function openLog() {
    $("log-state").textContent = "(live)";
    page.log = L.follow(function () {
      return BASE + "/logs?follow=1" + (page.logOffset !== null ? "&offset=" + encodeURIComponent(page.logOffset) : "");
    }, {
      log: function (text, ev) {
        appendLog(ev.data + "\n");
        if (ev.lastEventId) page.logOffset = ev.lastEventId;
      },
      end: function () {
        $("log-state").textContent = "(complete)";
      },
    }, {
      retryMs: RECONNECT_MS,
      onLive: function (live) {
        if ($("log-state").textContent !== "(complete)") $("log-state").textContent = live ? "(live)" : "(reconnecting…)";
      },
    });
  }

  /* ---- metrics ------------------------------------------------------------------------ */

  function loadMetrics() {
    return L.api("GET", "/jobs/" + JOB_ID + "/metrics").then(function (data) {
      var series = (data && data.metrics) || {};
      var names = Object.keys(series).sort();
      $("metrics-empty").hidden = names.some(function (n) {
        return series[n].length > 0;
      });
      names.forEach(function (name) {
        if (page.plots[name]) {
          page.plots[name].update(series[name]);
          return;
        }
        var box = L.el("div", { className: "chart metric-plot", dataset: { metric: name } });
        $("metric-plots").appendChild(box);
        page.plots[name] = L.lineChart(box, name, series[name]);
      });
      if (data && data.final) renderFinal(data.final);
      renderExtraction(data);
      /* an ended job whose log is still being read: read again until its metrics are final */
      if (page.job && !J.isLive(page.job) && data && data.metrics_complete === false) {
        clearTimeout(page.metricsTimer);
        page.metricsTimer = setTimeout(function () {
          loadJob().then(loadMetrics).catch(function () {});
        }, METRICS_POLL_MS);
      }
    });
  }

  /* While the job runs: its metrics, and the job itself for the findings and the billable
   * time (the status stream sends the job only at each transition). */
  function pollMetrics() {
    Promise.all([loadMetrics(), J.isLive(page.job) && !page.ended ? loadJob() : null])
      .catch(function () {})
      .then(function () {
        if (J.isLive(page.job)) page.metricsTimer = setTimeout(pollMetrics, METRICS_POLL_MS);
      });
  }

  /* ---- actions ------------------------------------------------------------------------ */

  function onStop() {
    if (!window.confirm("Stop job " + page.job.name + "? It gets SIGTERM, then a grace period to save a checkpoint.")) return;
    $("job-stop").disabled = true;
    L.api("POST", "/jobs/" + JOB_ID + "/stop", {})
      .then(render)
      .catch(showPageError)
      .then(function () {
        $("job-stop").disabled = false;
      });
  }

  function onRelease() {
    var pool = page.job && page.job.warm_pool;
    if (!pool) return;
    $("warm-release").disabled = true;
    L.showMessage("warm-error", "");
    L.api("DELETE", "/warm-pools/" + encodeURIComponent(pool.id))
      .then(loadJob)
      .catch(function (err) {
        L.showMessage("warm-error", L.errorText(err));
      })
      .then(function () {
        $("warm-release").disabled = false;
      });
  }

  function showPageError(err) {
    L.showMessage("page-error", L.errorText(err));
  }

  function init() {
    $("job-stop").addEventListener("click", onStop);
    $("warm-release").addEventListener("click", onRelease);
    if (!JOB_ID) {
      showPageError({ message: "This is not a job's address." });
      return;
    }
    $("job-report-link").href = "/jobs/" + JOB_ID + "/report";
    L.loadMe()
      .then(loadJob)
      .then(function () {
        openLog();
        pollMetrics();
        if (J.isLive(page.job)) openEvents();
      })
      .catch(function (err) {
        if (err && err.status === 404) err = { message: "There is no job #" + JOB_ID + " of yours." };
        $("job-status").textContent = "not found";
        showPageError(err);
      });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
