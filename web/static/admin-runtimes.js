/* labd admin console, live runtimes panel: every queued, starting, running or stopping
 * runtime (GET /runtimes) with a stop button (DELETE /runtimes/{id} with the reason typed
 * above the table, recorded in the audit log). Refreshed every REFRESH_MS. */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var note = A.notices("runtimes");
  var REFRESH_MS = 10000;
  var timer = null;

  function stateText(r) {
    if (r.state === "queued" && r.queue) return "queued (position " + r.queue.position + ")";
    return String(r.state);
  }

  function render(runtimes) {
    var tbody = $("runtimes").tBodies[0];
    tbody.textContent = "";
    if (!runtimes.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 6, className: "empty" }, ["No live runtimes."])]));
      return;
    }
    runtimes.forEach(function (r) {
      var stop = L.el("button", {
        type: "button",
        className: "small danger",
        textContent: r.state === "queued" ? "Cancel" : "Stop",
        disabled: r.state === "stopping",
        dataset: { id: String(r.id), user: String(r.user) },
        attrs: { "aria-label": (r.state === "queued" ? "Cancel" : "Stop") + " the runtime of " + r.user },
      });
      tbody.appendChild(
        L.el("tr", { dataset: { id: String(r.id), user: String(r.user) } }, [
          L.el("td", null, [String(r.user)]),
          // the runtime image (GET /images) with its hash on hover; none: the host's root
          L.el("td", r.image ? { title: r.image_hash || "" } : null, [
            (r.type === "gpu" ? "GPU" : "CPU") + (r.image ? " · " + r.image : ""),
          ]),
          L.el("td", null, [L.el("span", { className: "badge state state-" + r.state }, [stateText(r)])]),
          L.el("td", null, [L.formatTime(r.started_at)]),
          L.el("td", null, [(Array.isArray(r.gpus) ? r.gpus : []).join(", ") || "—"]),
          L.el("td", null, [stop]),
        ])
      );
    });
  }

  function load() {
    if (timer) clearTimeout(timer);
    timer = null;
    return L.api("GET", "/runtimes")
      .then(function (data) {
        render((data && data.runtimes) || []);
        timer = setTimeout(function () {
          load().catch(note.fail);
        }, REFRESH_MS);
      })
      .catch(function (err) {
        if (!A.unavailable("runtimes-panel", err)) throw err;
      });
  }

  function onClick(ev) {
    var b = ev.target.closest("button[data-id]");
    if (!b) return;
    var user = b.dataset.user;
    var reason = $("stop-reason").value.trim();
    note.clear();
    if (!window.confirm("Stop the runtime of " + user + "? Unsaved work in it is lost.")) return;
    b.disabled = true;
    L.api("DELETE", "/runtimes/" + encodeURIComponent(b.dataset.id), reason ? { reason: reason } : {})
      .then(function () {
        note.ok("The runtime of " + user + " is stopping.");
        return load();
      })
      .catch(function (err) {
        b.disabled = false;
        note.fail(err);
      });
  }

  A.ready.then(function () {
    $("runtimes").addEventListener("click", onClick);
    $("runtimes-refresh").addEventListener("click", function () {
      note.clear();
      load().catch(note.fail);
    });
    load().catch(note.fail);
  });
})();
