/* labd admin console, usage panel: CPU and GPU hours per UTC day and per user over the
 * chosen window, from the ledger (GET /usage?group_by=day|user), charted with uPlot. */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var DAY_S = 86400;

  /* [from, to): from the start of the UTC day (days - 1) days ago, to now. */
  function windowOf(days) {
    var now = Math.floor(Date.now() / 1000);
    var today = now - (now % DAY_S);
    return { from: today - (days - 1) * DAY_S, to: now + 1 };
  }

  /* Every day of the window, zero where the ledger has nothing: gaps would hide days. */
  function allDays(w, groups) {
    var byKey = {};
    groups.forEach(function (g) {
      byKey[g.key] = g;
    });
    var rows = [];
    for (var t = w.from; t < w.to; t += DAY_S) {
      var key = new Date(t * 1000).toISOString().slice(0, 10);
      var g = byKey[key] || { cpu_s: 0, gpu_s: 0 };
      rows.push({ key: key, cpu_s: g.cpu_s, gpu_s: g.gpu_s });
    }
    return rows;
  }

  function usage(w, by) {
    return L.api("GET", "/usage?group_by=" + by + "&from=" + w.from + "&to=" + w.to);
  }

  function load() {
    var days = Number($("usage-days").value) || 14;
    var w = windowOf(days);
    L.showMessage("usage-error", "");
    return Promise.all([usage(w, "day"), usage(w, "user")])
      .then(function (res) {
        var byDay = res[0], byUser = res[1];
        var t = byDay.totals || { cpu_s: 0, gpu_s: 0 };
        $("usage-totals").textContent =
          "In the last " + days + " days: " + L.hours(t.cpu_s).toFixed(2) + " CPU hours, " +
          L.hours(t.gpu_s).toFixed(2) + " GPU hours.";
        L.hoursChart($("usage-by-day"), allDays(w, byDay.groups || []), {
          title: "CPU and GPU hours per day (UTC)",
          keyTitle: "Day",
        });
        L.hoursChart($("usage-by-user"), byUser.groups || [], {
          title: "CPU and GPU hours per user",
          keyTitle: "User",
        });
      })
      .catch(function (err) {
        if (!A.unavailable("usage-panel", err)) L.showMessage("usage-error", L.errorText(err));
      });
  }

  A.ready.then(function () {
    $("usage-form").addEventListener("submit", function (ev) {
      ev.preventDefault();
      load();
    });
    load();
  });
})();
