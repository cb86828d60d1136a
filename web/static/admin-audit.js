/* labd admin console, audit log panel: entries newest first, filtered by action, actor
 * and time (GET /audit?action=&actor=&from=&to=), a page at a time (Per page). */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var page = { filter: "", before: null, next: null, number: 1 };

  /* datetime-local (the browser's local time) -> unix seconds, or null when empty. */
  function seconds(input) {
    if (!input.value) return null;
    var t = new Date(input.value).getTime();
    return isNaN(t) ? null : Math.floor(t / 1000);
  }

  function filterQuery() {
    var q = [];
    var action = $("audit-action").value.trim();
    var actor = $("audit-actor").value.trim();
    var from = seconds($("audit-from"));
    var to = seconds($("audit-to"));
    if (action) q.push("action=" + encodeURIComponent(action));
    if (actor) q.push("actor=" + encodeURIComponent(actor));
    if (from !== null) q.push("from=" + from);
    if (to !== null) q.push("to=" + to);
    return q.join("&");
  }

  function render(entries) {
    var tbody = $("audit").tBodies[0];
    tbody.textContent = "";
    if (!entries.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 6, className: "empty" }, ["No entries match."])]));
      return;
    }
    entries.forEach(function (e) {
      tbody.appendChild(
        L.el("tr", { dataset: { id: String(e.id), action: e.action } }, [
          L.el("td", null, [L.formatTime(e.time)]),
          L.el("td", null, [e.actor || "—"]),
          L.el("td", { className: "mono small" }, [e.action]),
          L.el("td", null, [e.target || "—"]),
          L.el("td", { className: "small" }, [e.address || "—"]),
          L.el("td", { className: "small detail" }, [e.detail || ""]),
        ])
      );
    });
  }

  function load() {
    var q = "limit=" + (Number($("audit-limit").value) || 50) + (page.filter ? "&" + page.filter : "") + (page.before ? "&before=" + page.before : "");
    L.showMessage("audit-error", "");
    return L.api("GET", "/audit?" + q)
      .then(function (data) {
        render((data && data.entries) || []);
        page.next = data ? data.next_before : null;
        $("audit-older").disabled = !page.next;
        $("audit-newer").disabled = !page.before;
        $("audit-page").textContent = "Page " + page.number;
      })
      .catch(function (err) {
        L.showMessage("audit-error", L.errorText(err));
      });
  }

  A.ready.then(function () {
    $("audit-form").addEventListener("submit", function (ev) {
      ev.preventDefault();
      page = { filter: filterQuery(), before: null, next: null, number: 1 };
      load();
    });
    $("audit-older").addEventListener("click", function () {
      if (!page.next) return;
      page.before = page.next;
      page.number += 1;
      load().then(function () {
        /* keep keyboard focus on the pager, wherever the new page ends */
        if ($("audit-older").disabled) $("audit-newer").focus();
      });
    });
    $("audit-newer").addEventListener("click", function () {
      page.before = null;
      page.number = 1;
      load().then(function () {
        $("audit-older").focus();
      });
    });
    load();
  });
})();
