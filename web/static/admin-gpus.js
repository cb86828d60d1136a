/* labd admin console, GPU pool panel: each device (whole card, MIG instance, share) with
 * its kind, holder, memory, utilisation and temperature, a share's budget notice, the
 * queue of GPU starts waiting for one (GET /gpus), and reading the devices again
 * (POST /gpus/rescan). */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var REFRESH_MS = 10000;
  var note = A.notices("gpus");
  var timer = null;

  function orDash(v, suffix) {
    return v === null || v === undefined ? "—" : String(v) + (suffix || "");
  }

  function memory(g) {
    if (g.memory_bytes === null || g.memory_bytes === undefined) return "—";
    var used = g.memory_used_bytes === null || g.memory_used_bytes === undefined ? "?" : L.bytes(g.memory_used_bytes);
    /* a share's memory is its budget: time-slicing does not enforce it, labd does */
    return used + " of " + L.bytes(g.memory_bytes) + (g.kind === "share" ? " budget" : "");
  }

  /* "MIG 1g.18gb (card 0)", "share of card 1", "whole card" */
  function kindText(g) {
    if (g.kind === "mig") return "MIG " + g.profile + " (card " + g.card + ")";
    if (g.kind === "share") return "share of card " + g.card;
    return "whole card";
  }

  function holderText(g) {
    if (!g.holder) return "—";
    if (g.holder.runtime_id) return g.holder.user + " (runtime " + g.holder.runtime_id + ")";
    return g.holder.user + " (job sandbox " + g.holder.job_pool_id + ")";
  }

  function renderGpus(gpus) {
    var tbody = $("gpus").tBodies[0];
    tbody.textContent = "";
    if (!gpus.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 8, className: "empty" }, ["No GPUs on this host."])]));
      return;
    }
    gpus.forEach(function (g) {
      var holder = [holderText(g)];
      if (g.notice) holder.push(L.el("span", { className: "alert alert-warn small block gpu-notice" }, [g.notice]));
      tbody.appendChild(
        L.el("tr", { dataset: { id: String(g.id), device: String(g.device), kind: String(g.kind), state: String(g.state) } }, [
          L.el("td", null, [String(g.device)]),
          L.el("td", { className: "kind" }, [kindText(g), g.uuid ? L.el("span", { className: "muted small block" }, [g.uuid]) : null]),
          L.el("td", null, [g.name || "GPU " + g.card, L.el("span", { className: "muted small block" }, [String(g.source)])]),
          L.el("td", null, [L.el("span", { className: "badge gpu-" + g.state }, [String(g.state)])]),
          L.el("td", { className: "holder" }, holder),
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
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 6, className: "empty" }, ["Nobody is waiting."])]));
      return;
    }
    queue.forEach(function (q) {
      tbody.appendChild(
        L.el("tr", { dataset: { position: String(q.position) } }, [
          L.el("td", null, [String(q.position)]),
          L.el("td", { className: "kind" }, [q.gpu_kind || "whole"]),
          L.el("td", null, [q.user || "—"]),
          L.el("td", null, [orDash(q.runtime_id)]),
          L.el("td", null, [L.formatTime(q.queued_at)]),
          L.el("td", null, [q.estimate_start_at ? L.formatTime(q.estimate_start_at) : "unknown"]),
        ])
      );
    });
  }

  function load() {
    clearTimeout(timer);
    return L.api("GET", "/gpus")
      .then(function (data) {
        renderGpus((data && data.gpus) || []);
        renderQueue((data && data.queue) || []);
        timer = setTimeout(load, REFRESH_MS);
      })
      .catch(function (err) {
        if (!A.unavailable("gpus-panel", err)) L.showMessage("gpus-error", L.errorText(err));
      });
  }

  function rescan() {
    var button = $("gpus-rescan");
    button.disabled = true;
    note.clear();
    L.api("POST", "/gpus/rescan", {})
      .then(function (r) {
        note.ok(r && r.nvml ? "Devices read again." : "Devices read again from the configuration (NVML is not loaded).");
        return load();
      })
      .catch(note.fail)
      .then(function () {
        button.disabled = false;
      });
  }

  A.ready.then(function () {
    $("gpus-rescan").addEventListener("click", rescan);
    return load();
  });
})();
