/* labd admin console, GPU pool panel: each GPU with its holder, memory, utilisation and
 * temperature, and the queue of GPU starts waiting for one (GET /gpus). */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var REFRESH_MS = 10000;

  function orDash(v, suffix) {
    return v === null || v === undefined ? "—" : String(v) + (suffix || "");
  }

  function memory(g) {
    if (g.memory_bytes === null || g.memory_bytes === undefined) return "—";
    var used = g.memory_used_bytes === null || g.memory_used_bytes === undefined ? "?" : L.bytes(g.memory_used_bytes);
    return used + " of " + L.bytes(g.memory_bytes);
  }

  function renderGpus(gpus) {
    var tbody = $("gpus").tBodies[0];
    tbody.textContent = "";
    if (!gpus.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 7, className: "empty" }, ["No GPUs on this host."])]));
      return;
    }
    gpus.forEach(function (g) {
      var holder = g.holder ? g.holder.user + " (runtime " + g.holder.runtime_id + ")" : "—";
      tbody.appendChild(
        L.el("tr", { dataset: { id: String(g.id), state: String(g.state) } }, [
          L.el("td", null, [String(g.id)]),
          L.el("td", null, [g.name || "GPU " + g.id, L.el("span", { className: "muted small block" }, [String(g.source)])]),
          L.el("td", null, [L.el("span", { className: "badge gpu-" + g.state }, [String(g.state)])]),
          L.el("td", { className: "holder" }, [holder]),
          L.el("td", null, [memory(g)]),
          L.el("td", null, [orDash(g.utilization_percent, " %")]),
          L.el("td", null, [orDash(g.temperature_c, " °C")]),
        ])
      );
    });
  }

  function renderQueue(queue) {
    var tbody = $("gpu-queue").tBodies[0];
    tbody.textContent = "";
    $("queue-length").textContent = queue.length + " waiting";
    if (!queue.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 5, className: "empty" }, ["Nobody is waiting."])]));
      return;
    }
    queue.forEach(function (q) {
      tbody.appendChild(
        L.el("tr", { dataset: { position: String(q.position) } }, [
          L.el("td", null, [String(q.position)]),
          L.el("td", null, [q.user || "—"]),
          L.el("td", null, [orDash(q.runtime_id)]),
          L.el("td", null, [L.formatTime(q.queued_at)]),
          L.el("td", null, [q.estimate_start_at ? L.formatTime(q.estimate_start_at) : "unknown"]),
        ])
      );
    });
  }

  function load() {
    return L.api("GET", "/gpus")
      .then(function (data) {
        renderGpus((data && data.gpus) || []);
        renderQueue((data && data.queue) || []);
        setTimeout(load, REFRESH_MS);
      })
      .catch(function (err) {
        if (!A.unavailable("gpus-panel", err)) L.showMessage("gpus-error", L.errorText(err));
      });
  }

  A.ready.then(load);
})();
