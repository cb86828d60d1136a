/* labd dashboard, quota card: CPU and GPU time left in the rolling 24 h and 7 days, storage
 * used of the quota, and the last 14 days of usage as a chart (uPlot).
 * Numbers come from GET /me/quota ("used", "remaining", "next_free_at"); where a labd does
 * not fill those yet, the time used is summed here from the ledger entries of
 * GET /me/usage with the same clipping the server uses, so the figures still match it. */
(function () {
  "use strict";

  var L = window.labd;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var DAY_S = 86400;
  var HISTORY_DAYS = 14;
  var REFRESH_MS = 60000;
  var WINDOWS = [
    { id: "left-gpu-24h", limit: "gpu_s_per_24h", kind: "gpu", span_s: DAY_S },
    { id: "left-cpu-24h", limit: "cpu_s_per_24h", kind: "cpu", span_s: DAY_S },
    { id: "left-gpu-7d", limit: "gpu_s_per_7d", kind: "gpu", span_s: 7 * DAY_S },
    { id: "left-cpu-7d", limit: "cpu_s_per_7d", kind: "cpu", span_s: 7 * DAY_S },
  ];
  var timer = null;
  var loading = false;

  /* An entry's seconds inside [lo, hi): as the server clips (open entries to their heartbeat). */
  function clip(e, lo, hi) {
    var end = e.end_s === null || e.end_s === undefined ? e.last_heartbeat_s : e.end_s;
    return Math.max(0, Math.min(end, hi) - Math.max(e.start_s, lo));
  }

  function usedFromLedger(entries, kind, lo, hi) {
    return entries.reduce(function (sum, e) {
      return e.kind === kind ? sum + clip(e, lo, hi) : sum;
    }, 0);
  }

  function pick(obj, key) {
    return obj && typeof obj === "object" && obj[key] !== undefined ? obj[key] : null;
  }

  function renderWindow(w, q, entries, now) {
    var limit = pick(q.limits && q.limits[w.limit], "value");
    var used = pick(q.used, w.limit);
    if (typeof used !== "number") used = usedFromLedger(entries, w.kind, now - w.span_s, now + 1);
    var remaining = pick(q.remaining, w.limit);
    if (typeof remaining !== "number" && limit !== null) remaining = Math.max(0, limit - used);
    var dd = $(w.id);
    dd.textContent = "";
    dd.parentNode.dataset.used = String(used);
    dd.appendChild(document.createTextNode(limit === null ? "No limit" : L.duration(remaining) + " left"));
    var detail = "used " + L.duration(used) + (limit === null ? "" : " of " + L.duration(limit));
    var next = pick(q.next_free_at, w.limit);
    if (limit !== null && remaining === 0 && next) detail += "; more from " + L.formatTime(next);
    dd.appendChild(L.el("span", { className: "small block" }, [detail]));
  }

  function renderStorage(q) {
    /* "used"."storage_bytes" of /me/quota, or a "storage" object as the admin's view has */
    var quota = pick(q.storage, "quota_bytes");
    if (typeof quota !== "number") quota = pick(q.limits && q.limits.storage_bytes, "value");
    var used = pick(q.used, "storage_bytes");
    if (typeof used !== "number") used = pick(q.storage, "used_bytes");
    var bar = $("storage-used");
    if (typeof used === "number" && quota) {
      bar.max = quota;
      bar.value = Math.min(used, quota);
      bar.hidden = false;
      $("storage-text").textContent =
        L.bytes(used) + " used of " + L.bytes(quota) + " (" + Math.round((used / quota) * 100) + " %)";
    } else {
      bar.hidden = true;
      $("storage-text").textContent =
        (quota ? "Quota " + L.bytes(quota) : "No storage limit") + "; the space used is not measured yet.";
    }
  }

  /* "job_storage" of /me/quota: what the user's kept training jobs hold on the
   * state file system against job_storage_bytes (docs/jobs.md "Retention"). */
  function renderJobStorage(q) {
    var js = q.job_storage || {};
    var bar = $("job-storage-used");
    var used = js.used_bytes, quota = js.quota_bytes;
    var jobs = typeof js.jobs === "number" ? js.jobs + (js.jobs === 1 ? " job" : " jobs") : "";
    if (typeof used !== "number") {
      bar.hidden = true;
      $("job-storage-text").textContent = "Not known.";
      return;
    }
    bar.hidden = !quota;
    if (quota) {
      bar.max = quota;
      bar.value = Math.min(used, quota);
    }
    $("job-storage-text").textContent =
      L.bytes(used) + (quota ? " used of " + L.bytes(quota) : " used (no limit)") + (jobs ? ", " + jobs : "") +
      (quota && used >= quota ? "; delete ended jobs to submit new ones" : "");
  }

  /* Hours per UTC day of the last HISTORY_DAYS days, an entry split at midnight. */
  function history(entries, now) {
    var today = now - (now % DAY_S);
    var rows = [];
    for (var d = today - (HISTORY_DAYS - 1) * DAY_S; d <= today; d += DAY_S) {
      rows.push({
        key: new Date(d * 1000).toISOString().slice(5, 10),
        cpu_s: usedFromLedger(entries, "cpu", d, d + DAY_S),
        gpu_s: usedFromLedger(entries, "gpu", d, d + DAY_S),
      });
    }
    return rows;
  }

  function load() {
    if (loading) return;
    loading = true;
    if (timer) clearTimeout(timer);
    var now = Math.floor(Date.now() / 1000);
    var from = now - (now % DAY_S) - (HISTORY_DAYS - 1) * DAY_S;
    Promise.all([L.api("GET", "/me/quota"), L.api("GET", "/me/usage?from=" + from + "&to=" + (now + 1))])
      .then(function (res) {
        var q = res[0] || {};
        var entries = (res[1] && res[1].entries) || [];
        L.showMessage("quota-error", "");
        WINDOWS.forEach(function (w) {
          renderWindow(w, q, entries, now);
        });
        renderStorage(q);
        renderJobStorage(q);
        L.hoursChart($("usage-history"), history(entries, now), {
          title: "Your CPU and GPU hours per day",
          keyTitle: "Day (UTC)",
        });
      })
      .catch(function (err) {
        L.showMessage("quota-error", "Could not load your quota: " + L.errorText(err));
      })
      .then(function () {
        loading = false;
        $("quota-card").setAttribute("aria-busy", "false");
        timer = setTimeout(load, REFRESH_MS);
      });
  }

  /* dashboard.js tells when the runtime changes: time used moves on then. */
  document.addEventListener("labd:runtime", function () {
    load();
  });

  function init() {
    /* After dashboard.js's loadMe: the first API call there settles the login. */
    L.api("GET", "/me").then(load, function () {});
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
