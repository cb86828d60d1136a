/* labd dashboard, notifications card: the user's webhooks (add, delete), the secret shown
 * once, and the delivery log of one webhook (each attempt: status, time, error), refreshed
 * while it is open (GET /webhooks/{id}/deliveries). docs/jobs.md "Notifications". */
(function () {
  "use strict";

  var L = window.labd;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var LOG_REFRESH_MS = 2000;
  var shown = null; /* the webhook whose log is open */
  var timer = null;

  function renderHooks(hooks) {
    var tbody = $("webhooks").tBodies[0];
    tbody.textContent = "";
    if (!hooks.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 4, className: "empty" }, ["No webhooks yet."])]));
      return;
    }
    hooks.forEach(function (h) {
      var log = L.el("button", {
        type: "button",
        className: "secondary small",
        textContent: "Delivery log",
        dataset: { id: String(h.id), action: "log" },
        attrs: { "aria-label": "Delivery log of " + h.url },
      });
      var del = L.el("button", {
        type: "button",
        className: "danger small",
        textContent: "Delete",
        dataset: { id: String(h.id), action: "delete", url: h.url },
        attrs: { "aria-label": "Delete webhook " + h.url },
      });
      tbody.appendChild(
        L.el("tr", { dataset: { id: String(h.id) } }, [
          L.el("td", null, [L.el("code", null, [h.url])]),
          L.el("td", null, [h.events.join(", ")]),
          L.el("td", null, [L.formatTime(h.created_at)]),
          L.el("td", null, [log, " ", del]),
        ])
      );
    });
  }

  function loadHooks() {
    return L.api("GET", "/webhooks").then(
      function (data) {
        renderHooks((data && data.webhooks) || []);
      },
      function (err) {
        L.showMessage("webhook-error", L.errorText(err));
      }
    );
  }

  /* One row per attempt, newest delivery first; a delivery not tried yet has one row too. */
  function renderLog(deliveries) {
    var tbody = $("webhook-log").tBodies[0];
    tbody.textContent = "";
    if (!deliveries.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 6, className: "empty" }, ["Nothing sent yet."])]));
      return;
    }
    deliveries.forEach(function (d) {
      var attempts = d.log.length ? d.log.slice().reverse() : [null];
      attempts.forEach(function (a) {
        tbody.appendChild(
          L.el("tr", { dataset: { delivery: String(d.id), state: d.state } }, [
            L.el("td", null, [d.event]),
            L.el("td", null, [L.el("span", { className: "badge state", dataset: { state: d.state } }, [d.state])]),
            L.el("td", { className: "num" }, [a ? String(a.attempt) : "—"]),
            L.el("td", null, [a ? L.formatTime(a.at) : "next " + L.formatTime(d.next_attempt_at)]),
            L.el("td", { className: "num" }, [a && a.status !== null ? String(a.status) : "—"]),
            L.el("td", null, [a ? a.error : ""]),
          ])
        );
      });
    });
  }

  function loadLog() {
    if (shown === null) return;
    var id = shown;
    L.api("GET", "/webhooks/" + encodeURIComponent(id) + "/deliveries").then(
      function (data) {
        if (shown === id) renderLog((data && data.deliveries) || []);
      },
      function (err) {
        L.showMessage("webhook-error", L.errorText(err));
      }
    );
  }

  function showLog(id) {
    shown = id;
    $("webhook-log-box").hidden = false;
    if (timer) clearInterval(timer);
    /* a retry may come any moment: the log follows while it is open */
    timer = setInterval(loadLog, LOG_REFRESH_MS);
    loadLog();
  }

  function hideLog() {
    shown = null;
    if (timer) clearInterval(timer);
    timer = null;
    $("webhook-log-box").hidden = true;
  }

  function onCreate(ev) {
    ev.preventDefault();
    var form = $("webhook-form");
    var events = [];
    var boxes = form.querySelectorAll("input[name=events]");
    for (var i = 0; i < boxes.length; i++) if (boxes[i].checked) events.push(boxes[i].value);
    L.showMessage("webhook-error", "");
    L.busy(form, true);
    L.api("POST", "/webhooks", { url: $("webhook-url").value.trim(), events: events })
      .then(function (data) {
        $("new-webhook-secret").textContent = data.webhook.secret;
        $("new-webhook-box").hidden = false;
        $("webhook-url").value = "";
        return loadHooks();
      })
      .catch(function (err) {
        L.showMessage("webhook-error", L.errorText(err));
      })
      .then(function () {
        L.busy(form, false);
      });
  }

  function onTableClick(ev) {
    var button = ev.target.closest("button[data-action]");
    if (!button) return;
    var id = button.dataset.id;
    if (button.dataset.action === "log") {
      showLog(id);
      return;
    }
    if (!window.confirm("Delete the webhook to " + button.dataset.url + " and its delivery log?")) return;
    L.showMessage("webhook-error", "");
    L.api("DELETE", "/webhooks/" + encodeURIComponent(id))
      .then(function () {
        if (shown === id) hideLog();
        return loadHooks();
      })
      .catch(function (err) {
        L.showMessage("webhook-error", L.errorText(err));
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    $("webhook-form").addEventListener("submit", onCreate);
    $("webhooks").addEventListener("click", onTableClick);
    L.wireCopy($("new-webhook-copy"), $("new-webhook-secret"));
    loadHooks();
  });
})();
