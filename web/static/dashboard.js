/* labd dashboard: who am I, API tokens, change password. */
(function () {
  "use strict";

  var L = window.labd;
  var $ = function (id) {
    return document.getElementById(id);
  };

  function renderTokens(tokens) {
    var tbody = $("tokens").tBodies[0];
    tbody.textContent = "";
    if (!tokens.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 5, className: "empty" }, ["No tokens yet."])]));
      return;
    }
    tokens.forEach(function (t) {
      var revoke = L.el("button", {
        type: "button",
        className: "danger small",
        textContent: "Revoke",
        dataset: { id: String(t.id), name: t.name },
        attrs: { "aria-label": "Revoke token " + t.name },
      });
      tbody.appendChild(
        L.el("tr", { dataset: { id: String(t.id), name: t.name } }, [
          L.el("td", null, [t.name]),
          L.el("td", null, [L.el("code", null, [t.prefix ? t.prefix + "…" : ""])]),
          L.el("td", null, [L.formatTime(t.created_at)]),
          L.el("td", null, [L.formatTime(t.last_used_at)]),
          L.el("td", null, [revoke]),
        ])
      );
    });
  }

  function loadTokens() {
    return L.api("GET", "/me/tokens").then(function (data) {
      renderTokens((data && data.tokens) || []);
    });
  }

  function onCreateToken(ev) {
    ev.preventDefault();
    var form = ev.currentTarget;
    var input = $("token-name");
    var name = input.value.trim();
    L.showMessage("token-error", "");
    if (!name) {
      L.showMessage("token-error", "Give the token a name.");
      input.focus();
      return;
    }
    L.busy(form, true);
    L.api("POST", "/me/tokens", { name: name })
      .then(function (tok) {
        $("new-token").textContent = tok.token;
        $("new-token-name").textContent = "“" + tok.name + "”";
        $("new-token-box").hidden = false;
        input.value = "";
        return loadTokens();
      })
      .catch(function (err) {
        L.showMessage("token-error", L.errorText(err));
      })
      .then(function () {
        L.busy(form, false);
      });
  }

  function onTokensClick(ev) {
    var button = ev.target.closest("button[data-id]");
    if (!button) return;
    var name = button.dataset.name;
    if (!window.confirm("Revoke token “" + name + "”? Scripts using it will stop working.")) return;
    button.disabled = true;
    L.showMessage("token-error", "");
    L.api("DELETE", "/me/tokens/" + encodeURIComponent(button.dataset.id))
      .then(function () {
        /* The one-time display belongs to a token that may be gone now. */
        if ($("new-token-name").textContent === "“" + name + "”") {
          $("new-token-box").hidden = true;
          $("new-token").textContent = "";
        }
        return loadTokens();
      })
      .catch(function (err) {
        button.disabled = false;
        L.showMessage("token-error", L.errorText(err));
      });
  }

  function onChangePassword(ev) {
    ev.preventDefault();
    var form = ev.currentTarget;
    var current = $("current-password");
    var next = $("new-password");
    var repeat = $("repeat-password");
    L.showMessage("password-error", "");
    L.showMessage("password-message", "");
    if (!current.value) {
      L.showMessage("password-error", "Enter your current password.");
      current.focus();
      return;
    }
    if (!next.value) {
      L.showMessage("password-error", "Enter a new password.");
      next.focus();
      return;
    }
    if (next.value !== repeat.value) {
      L.showMessage("password-error", "The new passwords do not match.");
      repeat.focus();
      return;
    }
    L.busy(form, true);
    L.api("POST", "/me/password", { current_password: current.value, new_password: next.value })
      .then(function () {
        form.reset();
        L.showMessage("password-message", "Password changed. Your other sessions have been logged out.");
      })
      .catch(function (err) {
        var text = L.errorText(err);
        if (err && err.status === 403 && err.code === "forbidden") text = "The current password is wrong.";
        L.showMessage("password-error", text);
      })
      .then(function () {
        L.busy(form, false);
      });
  }

  function init() {
    $("token-form").addEventListener("submit", onCreateToken);
    $("tokens").addEventListener("click", onTokensClick);
    $("password-form").addEventListener("submit", onChangePassword);
    L.wireCopy($("new-token-copy"), $("new-token"));

    L.loadMe()
      .then(loadTokens)
      .catch(function (err) {
        L.showMessage("page-error", L.errorText(err));
      });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
