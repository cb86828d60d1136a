/* labd admin console: what the panels (admin*.js) share. Each panel waits for A.ready (the
 * signed-in admin, with the CSRF token loaded), reports into its own alert boxes, and shows
 * "not available" when its API answers 404 (a labd without that part). */
(function () {
  "use strict";

  var L = window.labd;

  /* The limits of a plan or override, in the order the API documents them; unit says how
   * a value is read and shown: "s" seconds, "bytes", "cpus" thousandths of a CPU shown and
   * typed as CPUs ("2", "0.5"), or "n" a plain count. The API stays in base units. */
  var LIMITS = [
    { name: "cpu_runtime_max_s", label: "CPU runtime length", unit: "s" },
    { name: "gpu_runtime_max_s", label: "GPU runtime length", unit: "s" },
    { name: "cpu_s_per_24h", label: "CPU time per 24 h", unit: "s" },
    { name: "gpu_s_per_24h", label: "GPU time per 24 h", unit: "s" },
    { name: "cpu_s_per_7d", label: "CPU time per 7 days", unit: "s" },
    { name: "gpu_s_per_7d", label: "GPU time per 7 days", unit: "s" },
    { name: "storage_bytes", label: "Storage", unit: "bytes" },
    { name: "memory_bytes", label: "Memory", unit: "bytes" },
    { name: "cpus_milli", label: "CPUs", unit: "cpus" },
    { name: "gpus_per_runtime", label: "GPUs (per job at most; 0: none)", unit: "n" },
    { name: "concurrent_jobs", label: "Concurrent jobs", unit: "n" },
    { name: "job_max_runtime_s", label: "Job length", unit: "s" },
    { name: "network", label: "Network (none or egress)", unit: "net" },
    { name: "egress_bytes_per_s", label: "Egress bytes per second", unit: "bytes" },
    { name: "job_storage_bytes", label: "Kept job data", unit: "bytes" },
  ];

  var SECONDS = { s: 1, m: 60, min: 60, h: 3600, d: 86400 };
  var BYTES = { "": 1, K: 1024, M: 1048576, G: 1073741824, T: 1099511627776 };

  /* A limit value as the API gives it (number, "unlimited" or null) as text, the way the
   * whole UI writes it ("1 h 30 min", "20 GiB"), which parseLimit reads back exactly (a size
   * that is not a whole number of its unit stays in bytes). */
  function formatLimit(value, unit) {
    if (value === null || value === undefined) return "";
    if (value === "unlimited") return "unlimited";
    if (unit === "s") return L.duration(value);
    if (unit === "cpus") return String(value / 1000);
    if (unit === "bytes") {
      var text = L.bytes(value);
      return parseLimit(text, "bytes") === value ? text : String(value);
    }
    return String(value);
  }

  /* Reads a field: "" -> null (not set), "unlimited", or a whole number with an optional
   * unit ("4h", "1h30m", "1 h 30 min", "20G", "20 GiB"). Throws Error(message) for anything
   * else. */
  function parseLimit(text, unit) {
    text = String(text || "").trim();
    if (!text) return null;
    if (unit === "net") {
      if (/^(none|egress)$/i.test(text)) return text.toLowerCase();
      throw new Error("must be none or egress");
    }
    if (/^unlimited$/i.test(text)) return "unlimited";
    if (unit === "cpus") {
      /* CPUs as [runtime] cpus takes them: "2", "0.5", at most three decimals */
      var c = /^(\d+(?:\.\d{1,3})?)$/.exec(text);
      if (c) return Math.round(Number(c[1]) * 1000);
      throw new Error("a number of CPUs such as 2 or 0.5, or unlimited");
    }
    if (/^\d+$/.test(text)) return Number(text);
    if (unit === "s") {
      var total = 0;
      var rest = text.replace(/(\d+)\s*(min|[smhd])/gi, function (_, n, u) {
        total += Number(n) * SECONDS[u.toLowerCase()];
        return "";
      });
      if (!rest.trim()) return total;
    } else if (unit === "bytes") {
      var m = /^(\d+(?:\.\d+)?)\s*(?:([KMGT])(?:i?B)?|B)$/i.exec(text);
      if (m) return Math.round(Number(m[1]) * BYTES[(m[2] || "").toUpperCase()]);
    }
    throw new Error(
      unit === "s"
        ? "a duration such as 90 min, 4 h or 2 d, or unlimited"
        : unit === "bytes"
          ? "a size such as 500M or 20 GiB, or unlimited"
          : "a whole number, or unlimited"
    );
  }

  /* Reads the inputs named limit-<prefix>-<name> into {name: value}; values left empty are
   * left out. Throws Error naming the limit on a bad one (and focuses it). */
  function readLimits(prefix) {
    var out = {};
    LIMITS.forEach(function (l) {
      var input = document.getElementById(prefix + "-" + l.name);
      if (!input) return;
      var v;
      try {
        v = parseLimit(input.value, l.unit);
      } catch (e) {
        input.focus();
        throw new Error(l.label + " (" + l.name + "): " + e.message);
      }
      if (v !== null) out[l.name] = v;
    });
    return out;
  }

  /* An <input> for one limit, labelled, with id prefix-name. */
  function limitInput(prefix, l, value) {
    return L.el("input", {
      type: "text",
      id: prefix + "-" + l.name,
      name: l.name,
      value: formatLimit(value, l.unit),
      autocomplete: "off",
      spellcheck: false,
      attrs: { inputmode: "text", "data-limit": l.name },
    });
  }

  /* The notices of a panel: PANEL-error and PANEL-message. */
  function notices(panel) {
    return {
      clear: function () {
        L.showMessage(panel + "-error", "");
        L.showMessage(panel + "-message", "");
      },
      ok: function (text) {
        L.showMessage(panel + "-error", "");
        L.showMessage(panel + "-message", text);
      },
      fail: function (err) {
        L.showMessage(panel + "-message", "");
        L.showMessage(panel + "-error", L.errorText(err));
      },
    };
  }

  /* A panel whose API is missing (404 on a labd without that part): says so in the panel
   * and hides its controls; true when err was that. */
  function unavailable(panelId, err) {
    if (!err || err.status !== 404) return false;
    var panel = document.getElementById(panelId);
    if (!panel || panel.dataset.available === "false") return true;
    panel.dataset.available = "false";
    Array.prototype.forEach.call(panel.children, function (c) {
      if (c.tagName !== "H2") c.hidden = true;
    });
    panel.appendChild(
      L.el("p", { className: "alert alert-warn unavailable", attrs: { role: "status" } }, [
        "Not available: this labd does not offer it yet.",
      ])
    );
    return true;
  }

  var readyResolve, readyReject;
  var ready = new Promise(function (resolve, reject) {
    readyResolve = resolve;
    readyReject = reject;
  });
  /* Panels attach with A.ready.then(...); a rejection is shown once, by admin.js. */
  ready.catch(function () {});

  function start() {
    L.loadMe()
      .then(function (me) {
        if (me.role !== "admin") throw new L.ApiError(403, "forbidden", "This page is for administrators.");
        readyResolve(me);
      })
      .catch(readyReject);
  }

  /* A small event bus: a panel that changes users, plans or groups tells the others. */
  function changed(what) {
    document.dispatchEvent(new CustomEvent("labd:changed", { detail: what }));
  }
  function onChanged(fn) {
    document.addEventListener("labd:changed", function (ev) {
      fn(ev.detail);
    });
  }

  /* A named list's form (plans, groups): runs the save with the form busy, says what
   * happened ("Plan course created."), then leaves edit mode and reloads. */
  function save(o) {
    L.busy(o.form, true);
    return o.work
      .then(function () {
        var verb = o.editing ? "saved" : "created";
        o.stopEditing();
        o.note.ok(o.what + " " + o.name + " " + verb + ".");
        return o.reload();
      })
      .catch(o.note.fail)
      .then(function () {
        L.busy(o.form, false);
      });
  }

  /* A row's Edit or Delete button of a named list; kind ("plan") names it for
   * screen readers, and rowActions reads action and name back. */
  function rowButton(action, label, kind, name, cls) {
    return L.el("button", {
      type: "button",
      className: "small " + (cls || "secondary"),
      textContent: label,
      dataset: { action: action, name: name },
      attrs: { "aria-label": label + " " + kind + " " + name },
    });
  }

  /* The Edit and Delete buttons of a named list's rows, one click handler for the
   * table: o.find(name) the item, o.edit(item or null), o.editing() the one being
   * edited, o.path the API collection ("/plans"), o.confirm(name) the question. */
  function rowActions(o) {
    return function (ev) {
      var b = ev.target.closest("button[data-action]");
      if (!b) return;
      var name = b.dataset.name;
      o.note.clear();
      if (b.dataset.action === "edit") {
        o.edit(o.find(name) || null);
      } else if (b.dataset.action === "delete") {
        if (!window.confirm(o.confirm(name))) return;
        L.api("DELETE", o.path + "/" + encodeURIComponent(name))
          .then(function () {
            var e = o.editing();
            if (e && e.name === name) o.edit(null);
            o.note.ok(o.what + " " + name + " deleted.");
            return o.reload();
          })
          .catch(o.note.fail);
      }
    };
  }

  window.labdAdmin = {
    save: save,
    rowActions: rowActions,
    rowButton: rowButton,
    LIMITS: LIMITS,
    formatLimit: formatLimit,
    parseLimit: parseLimit,
    readLimits: readLimits,
    limitInput: limitInput,
    notices: notices,
    unavailable: unavailable,
    ready: ready,
    changed: changed,
    onChanged: onChanged,
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
