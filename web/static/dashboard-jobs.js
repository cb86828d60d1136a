/* labd dashboard: the training-jobs card — the submit form, the list of jobs and warm pools
 * (polled every few seconds), and a notice when one of the user's jobs ends while the
 * dashboard is open (an in-page toast, plus a browser notification once allowed). */
(function () {
  "use strict";

  var L = window.labd;
  var J = L.jobs;
  var $ = function (id) {
    return document.getElementById(id);
  };

  var POLL_MS = 3000;
  var LIST_LIMIT = 50;
  /* API field (its first name part) -> the form input it comes from */
  var FIELD_INPUT = {
    name: "job-name",
    command: "job-command",
    script: "job-script",
    working_dir: "job-workdir",
    type: "job-type",
    gpu_count: "job-gpus",
    max_runtime_s: "job-max-runtime",
    keep_alive_s: "job-keep-alive",
    max_retries: "job-retries",
    hyperparameters: "job-hyperparameters",
    input_channels: "job-channels",
    metric_definitions: "job-metrics",
  };

  var state = {
    seen: {}, /* job id -> the status we last showed; a job is announced once it ends */
    loadedAt: Date.now(),
    timer: null,
    drawn: {}, /* table id -> the JSON text it shows */
  };

  /* ---- submit form ---------------------------------------------------------------- */

  function clearFieldErrors() {
    Object.keys(FIELD_INPUT).forEach(function (f) {
      var input = $(FIELD_INPUT[f]);
      input.removeAttribute("aria-invalid");
      L.showMessage(FIELD_INPUT[f] + "-error", "");
    });
    L.showMessage("job-form-error", "");
    L.showMessage("job-form-message", "");
  }

  /* Under the form (not a toast: toasts are for what happens while you look elsewhere). */
  function submitted(job) {
    var box = $("job-form-message");
    box.textContent = "";
    box.appendChild(document.createTextNode("Job " + job.name + " submitted. "));
    box.appendChild(L.el("a", { href: "/jobs/" + job.id }, ["Open its page"]));
    box.hidden = false;
  }

  /* "[2].regex" -> "Line 3, regex: " (the boxes hold one entry a line; the command's
   * entries are its words); "" -> "". */
  function fieldDetail(base, rest) {
    var m = /^\[(\d+)\]\.?(.*)$/.exec(rest);
    if (!m) return rest ? rest.replace(/^\./, "") + ": " : "";
    var what = base === "command" ? "Word " : "Line ";
    return what + (Number(m[1]) + 1) + (m[2] ? ", " + m[2] : "") + ": ";
  }

  /* Shows message next to the input of the API field ("metric_definitions[2].regex" ->
   * the metrics box); a field the form has no input for goes to the form's alert. */
  function showFieldError(field, message) {
    var base = String(field || "").split(/[.[]/)[0];
    var id = FIELD_INPUT[base];
    if (!id) {
      L.showMessage("job-form-error", message + (field ? " (" + field + ")" : ""));
      return;
    }
    L.showMessage(id + "-error", fieldDetail(base, field.slice(base.length)) + message);
    var input = $(id);
    input.setAttribute("aria-invalid", "true");
    input.focus();
  }

  function numberField(body, key, id) {
    var v = $(id).value.trim();
    if (v !== "") body[key] = Number(v);
  }

  /* The request body from the form; throws J.InputError naming the field it cannot read. */
  function readForm() {
    var body = { name: $("job-name").value.trim() };
    if (scriptMode()) {
      body.script = $("job-script").value;
      if (!body.script.trim()) throw new J.InputError("script", "Write or paste the script.");
    } else {
      body.command = J.splitCommand($("job-command").value);
    }
    var dir = $("job-workdir").value.trim();
    if (dir) body.working_dir = dir;
    body.type = $("job-type").value;
    if (body.type === "gpu") numberField(body, "gpu_count", "job-gpus");
    numberField(body, "max_runtime_s", "job-max-runtime");
    numberField(body, "keep_alive_s", "job-keep-alive");
    numberField(body, "max_retries", "job-retries");
    var hp = J.jsonObject($("job-hyperparameters").value, "hyperparameters");
    if (Object.keys(hp).length) body.hyperparameters = hp;
    var channels = J.nameValueLines($("job-channels").value, "input_channels", "name=folder");
    if (channels.length) body.input_channels = channels.map(function (c) {
      return { name: c.name, path: c.value.trim() };
    });
    var metrics = J.nameValueLines($("job-metrics").value, "metric_definitions", "name=regex");
    if (metrics.length) body.metric_definitions = metrics.map(function (m) {
      return { name: m.name, regex: m.value };
    });
    return body;
  }

  /* Command or Script: one of the two fields shows, and only it is sent. */
  function scriptMode() {
    return $("job-run-script").checked;
  }

  function showRunAs() {
    var script = scriptMode();
    $("job-command-field").hidden = script;
    $("job-command").required = !script;
    $("job-script-field").hidden = !script;
  }

  /* A pasted snippet of several lines would become one line in the command field (an
   * <input> drops its line breaks) and fail: it goes to the script box instead. */
  function onCommandPaste(ev) {
    var text = ev.clipboardData && ev.clipboardData.getData("text/plain");
    if (!text || !/[\r\n]/.test(text.replace(/[\r\n]+$/, ""))) return;
    ev.preventDefault();
    $("job-run-script").checked = true;
    showRunAs();
    $("job-script").value = text.replace(/\r\n?/g, "\n");
    $("job-script").focus();
  }

  function onSubmit(ev) {
    ev.preventDefault();
    var form = ev.currentTarget;
    clearFieldErrors();
    var body;
    try {
      body = readForm();
    } catch (err) {
      if (!(err instanceof J.InputError)) throw err;
      showFieldError(err.field, err.message);
      return;
    }
    if (!body.name) {
      showFieldError("name", "Give the job a name.");
      return;
    }
    L.busy(form, true);
    L.api("POST", "/jobs", body)
      .then(function (job) {
        state.seen[job.id] = job.status;
        submitted(job);
        $("job-name").value = "";
        return refresh();
      })
      .catch(function (err) {
        if (err && err.field) showFieldError(err.field, L.errorText(err));
        else L.showMessage("job-form-error", L.errorText(err));
      })
      .then(function () {
        L.busy(form, false);
        $("job-gpus").disabled = $("job-type").value !== "gpu";
      });
  }

  /* ---- job list ------------------------------------------------------------------- */

  function jobLink(job) {
    return L.el("a", { href: "/jobs/" + encodeURIComponent(job.id) }, [job.name]);
  }

  /* True when what is drawn in table id already shows data (the fields shown): a list read every few
   * seconds is redrawn only when it changed, so that a button is not replaced under the
   * pointer (or the keyboard focus) for nothing. */
  function unchanged(id, data) {
    var text = JSON.stringify(data);
    if (state.drawn[id] === text) return true;
    state.drawn[id] = text;
    return false;
  }

  function renderJobs(jobs) {
    var shown = jobs.map(function (j) {
      return [j.id, j.name, J.statusText(j), j.created_at, j.billable_s, J.warmText(j.warm_pool)];
    });
    if (unchanged("jobs", shown)) return;
    var tbody = $("jobs").tBodies[0];
    tbody.textContent = "";
    if (!jobs.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 5, className: "empty" }, ["No jobs yet."])]));
      return;
    }
    jobs.forEach(function (job) {
      tbody.appendChild(
        L.el("tr", { dataset: { id: String(job.id), name: job.name, status: job.status } }, [
          L.el("td", null, [jobLink(job)]),
          L.el("td", null, [L.el("span", { className: J.statusClass(job.status) }, [J.statusText(job)])]),
          L.el("td", null, [J.timeOf(job.created_at)]),
          L.el("td", { className: "num" }, [L.duration(job.billable_s)]),
          L.el("td", null, [J.warmText(job.warm_pool) || "—"]),
        ])
      );
    });
  }

  function renderPools(pools) {
    var shown = pools.map(function (p) {
      return [p.id, p.status, p.type, p.gpu_count, p.job_id, p.available_until];
    });
    if (unchanged("warm-pools", shown)) return;
    var tbody = $("warm-pools").tBodies[0];
    tbody.textContent = "";
    if (!pools.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 6, className: "empty" }, ["No warm pools."])]));
      return;
    }
    pools.forEach(function (p) {
      var release = L.el("button", {
        type: "button",
        className: "danger small",
        textContent: "Release",
        dataset: { pool: String(p.id) },
        attrs: { "aria-label": "Release warm pool " + p.id },
      });
      release.hidden = p.status !== "Available";
      tbody.appendChild(
        L.el("tr", { dataset: { pool: String(p.id) } }, [
          L.el("td", null, ["#" + p.id]),
          L.el("td", null, [p.status]),
          L.el("td", null, [p.type === "gpu" ? "GPU × " + p.gpu_count : "CPU"]),
          L.el("td", null, [p.job_id ? L.el("a", { href: "/jobs/" + p.job_id }, ["#" + p.job_id]) : "—"]),
          L.el("td", null, [J.timeOf(p.available_until)]),
          L.el("td", null, [release]),
        ])
      );
    });
  }

  /* A job we saw live (or never saw, created since the page loaded) that is now over is
   * announced once. Jobs already over when the page loaded are not. */
  function announceEnded(jobs) {
    jobs.forEach(function (job) {
      var before = state.seen[job.id];
      var created = Date.parse(job.created_at) || 0;
      var wasLive = before ? before === "InProgress" || before === "Stopping" : created >= state.loadedAt - 5000;
      state.seen[job.id] = job.status;
      if (!J.isLive(job) && wasLive && before !== job.status) ended(job);
    });
  }

  function ended(job) {
    var text = "Job " + job.name + " ended: " + J.statusText(job) + ".";
    if (job.failure_reason) text += " " + job.failure_reason;
    toast(text, job);
    if (window.Notification && window.Notification.permission === "granted") {
      try {
        new window.Notification("labd: job " + job.name, { body: text, tag: "labd-job-" + job.id });
      } catch (e) {
        /* some browsers allow notifications only from a service worker: the toast is enough */
      }
    }
  }

  function toast(text, job) {
    var box = $("toasts");
    var close = L.el("button", { type: "button", className: "secondary small", textContent: "Dismiss" });
    var item = L.el("div", { className: "toast", dataset: { job: String(job.id) } }, [
      L.el("p", null, [text, " ", L.el("a", { href: "/jobs/" + job.id }, ["Open the job"])]),
      close,
    ]);
    close.addEventListener("click", function () {
      item.remove();
    });
    box.appendChild(item);
    /* A toast stays 20 s: long enough to be read after a glance away, short enough not to
     * sit on the page's buttons (Dismiss removes it sooner). */
    setTimeout(function () {
      item.remove();
    }, 20000);
  }

  function refresh() {
    var jobs = L.api("GET", "/jobs?limit=" + LIST_LIMIT).then(function (data) {
      var list = (data && data.jobs) || [];
      announceEnded(list);
      renderJobs(list);
      L.showMessage("jobs-error", "");
    });
    var pools = L.api("GET", "/warm-pools").then(function (data) {
      renderPools((data && data.warm_pools) || []);
      L.showMessage("warm-pools-error", "");
    });
    return Promise.all([
      jobs.catch(function (err) {
        L.showMessage("jobs-error", "Cannot load your jobs: " + L.errorText(err));
      }),
      pools.catch(function (err) {
        L.showMessage("warm-pools-error", "Cannot load your warm pools: " + L.errorText(err));
      }),
    ]);
  }

  function schedule() {
    clearTimeout(state.timer);
    state.timer = setTimeout(function () {
      refresh().then(schedule);
    }, POLL_MS);
  }

  function onPoolsClick(ev) {
    var button = ev.target.closest("button[data-pool]");
    if (!button) return;
    if (!window.confirm("Release warm pool #" + button.dataset.pool + "? The next job starts cold.")) return;
    button.disabled = true;
    L.api("DELETE", "/warm-pools/" + encodeURIComponent(button.dataset.pool))
      .then(refresh)
      .catch(function (err) {
        button.disabled = false;
        L.showMessage("warm-pools-error", L.errorText(err));
      });
  }

  function initNotify() {
    var button = $("job-notify");
    if (!window.Notification || window.Notification.permission !== "default") return;
    button.hidden = false;
    button.addEventListener("click", function () {
      window.Notification.requestPermission().then(function () {
        button.hidden = true;
      });
    });
  }

  /* The caller's tuning jobs (searches whose trials are the jobs above), each a link to its
   * page, under the jobs table; nothing when there is none. */
  function showTuningJobs() {
    L.api("GET", "/tuning-jobs?limit=20").then(function (data) {
      var list = (data && data.tuning_jobs) || [];
      if (!list.length) return;
      var links = [];
      list.forEach(function (t, i) {
        if (i) links.push(", ");
        links.push(L.el("a", { href: "/tuning/" + encodeURIComponent(t.id) }, [t.name]), " (" + t.status + ")");
      });
      $("jobs").parentNode.after(L.el("p", { id: "tuning-jobs", className: "small" }, ["Tuning jobs: "].concat(links)));
    }).catch(function () {});
  }

  function init() {
    $("job-form").addEventListener("submit", onSubmit);
    $("job-run-command").addEventListener("change", showRunAs);
    $("job-run-script").addEventListener("change", showRunAs);
    $("job-command").addEventListener("paste", onCommandPaste);
    showRunAs();
    $("job-type").addEventListener("change", function () {
      $("job-gpus").disabled = $("job-type").value !== "gpu";
    });
    $("warm-pools").addEventListener("click", onPoolsClick);
    initNotify();
    showTuningJobs();
    /* Wait for the CSRF token (common.js's loadMe, started by dashboard.js): the
     * first list needs none, but a quick submit does. */
    L.api("GET", "/jobs?limit=" + LIST_LIMIT)
      .then(function (data) {
        ((data && data.jobs) || []).forEach(function (job) {
          state.seen[job.id] = job.status;
        });
      })
      .catch(function () {})
      .then(refresh)
      .then(schedule);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
