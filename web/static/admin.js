/* labd admin console, users panel: list, create, enable/disable, promote/demote, reset,
 * delete users. The other panels are admin-*.js. */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var myName = null;

  function clearNotices() {
    L.showMessage("admin-error", "");
    L.showMessage("admin-message", "");
  }

  function fail(err) {
    L.showMessage("admin-message", "");
    L.showMessage("admin-error", L.errorText(err));
  }

  function actionButton(action, label, user, extraClass) {
    return L.el("button", {
      type: "button",
      className: "small " + (extraClass || "secondary"),
      textContent: label,
      dataset: { action: action, name: user.name },
      attrs: { "aria-label": label + " " + user.name },
    });
  }

  function renderUsers(users) {
    var tbody = $("users").tBodies[0];
    tbody.textContent = "";
    if (!users.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 5, className: "empty" }, ["No users."])]));
      return;
    }
    users.forEach(function (u) {
      var isAdmin = u.role === "admin";
      var nameCell = [u.name];
      if (u.name === myName) nameCell.push(L.el("span", { className: "muted small" }, [" (you)"]));
      var actions = L.el("div", { className: "actions" }, [
        u.disabled ? actionButton("enable", "Enable", u) : actionButton("disable", "Disable", u),
        isAdmin ? actionButton("make-user", "Make user", u) : actionButton("make-admin", "Make admin", u),
        actionButton("reset", "Reset password", u),
        actionButton("quota", "Quota", u),
        actionButton("delete", "Delete", u, "danger"),
      ]);
      tbody.appendChild(
        L.el("tr", { dataset: { name: u.name } }, [
          L.el("td", null, nameCell),
          L.el("td", null, [L.el("span", { className: "badge role" + (isAdmin ? " admin" : "") }, [u.role])]),
          L.el("td", null, [
            L.el("span", { className: "badge status " + (u.disabled ? "disabled" : "active") }, [
              u.disabled ? "disabled" : "active",
            ]),
          ]),
          L.el("td", null, [L.formatTime(u.created_at)]),
          L.el("td", null, [actions]),
        ])
      );
    });
  }

  function loadUsers() {
    return L.api("GET", "/users").then(function (data) {
      var users = (data && data.users) || [];
      renderUsers(users);
      A.changed({ users: users });
    });
  }

  /* the import panel created users: list them */
  A.onChanged(function (what) {
    if (what.imported) loadUsers().catch(fail);
  });

  function showSecret(box, nameEl, valueEl, name, password) {
    $(nameEl).textContent = name;
    $(valueEl).textContent = password;
    $(box).hidden = false;
  }

  function onCreate(ev) {
    ev.preventDefault();
    var form = ev.currentTarget;
    var name = $("new-name").value.trim();
    var role = $("new-role").value;
    var password = $("new-password").value;
    clearNotices();
    $("created-box").hidden = true;
    $("created-password").textContent = "";
    if (!name) {
      L.showMessage("admin-error", "Enter a user name.");
      $("new-name").focus();
      return;
    }
    var body = { name: name, role: role };
    if (password) body.password = password;
    L.busy(form, true);
    L.api("POST", "/users", body)
      .then(function (data) {
        var user = (data && data.user) || { name: name };
        form.reset();
        if (data && data.password) {
          showSecret("created-box", "created-name", "created-password", user.name, data.password);
        } else {
          L.showMessage("admin-message", "User " + user.name + " created.");
        }
        return loadUsers();
      })
      .catch(fail)
      .then(function () {
        L.busy(form, false);
      });
  }

  function patchUser(name, body, done) {
    return L.api("PATCH", "/users/" + encodeURIComponent(name), body).then(function (data) {
      if (done) done(data);
      return loadUsers();
    });
  }

  function onUsersClick(ev) {
    var button = ev.target.closest("button[data-action]");
    if (!button) return;
    var name = button.dataset.name;
    var action = button.dataset.action;
    var work;
    clearNotices();

    if (action === "quota") {
      /* admin-quota.js opens this user's plan, groups and overrides */
      A.changed({ editQuota: name });
      return;
    }
    if (action === "disable") {
      work = patchUser(name, { disabled: true }, function () {
        L.showMessage("admin-message", name + " is disabled and logged out.");
      });
    } else if (action === "enable") {
      work = patchUser(name, { disabled: false }, function () {
        L.showMessage("admin-message", name + " is enabled.");
      });
    } else if (action === "make-admin") {
      work = patchUser(name, { role: "admin" }, function () {
        L.showMessage("admin-message", name + " is now an admin.");
      });
    } else if (action === "make-user") {
      work = patchUser(name, { role: "user" }, function () {
        L.showMessage("admin-message", name + " is now a user.");
      });
    } else if (action === "reset") {
      if (!window.confirm("Reset the password of " + name + "? They will be logged out.")) return;
      $("reset-box").hidden = true;
      work = patchUser(name, { reset_password: true }, function (data) {
        if (data && data.password) {
          showSecret("reset-box", "reset-name", "reset-password", name, data.password);
        } else {
          L.showMessage("admin-message", "Password of " + name + " reset.");
        }
      });
    } else if (action === "delete") {
      if (!window.confirm("Delete user " + name + "? Their sessions and API tokens are removed too.")) return;
      work = L.api("DELETE", "/users/" + encodeURIComponent(name)).then(function () {
        L.showMessage("admin-message", "User " + name + " deleted.");
        return loadUsers();
      });
    } else {
      return;
    }
    button.disabled = true;
    work
      .then(function () {
        /* The table was rebuilt: put keyboard focus back on the row's counterpart button. */
        var swap = { disable: "enable", enable: "disable", "make-admin": "make-user", "make-user": "make-admin" };
        var target = document.querySelector(
          '#users tr[data-name="' + name + '"] button[data-action="' + (swap[action] || action) + '"]'
        );
        if (target) target.focus();
      })
      .catch(function (err) {
        button.disabled = false;
        fail(err);
      });
  }

  function init() {
    $("create-form").addEventListener("submit", onCreate);
    $("users").addEventListener("click", onUsersClick);
    L.wireCopy($("created-copy"), $("created-password"));
    L.wireCopy($("reset-copy"), $("reset-password"));

    A.ready
      .then(function (me) {
        myName = me.name;
        loadHealth();
        return loadUsers();
      })
      .catch(fail);
  }

  /* What the supervisor found missing on this host (cgroup controllers), from
   * GET /api/v1/health: shown, never hidden away in a log. */
  function loadHealth() {
    L.api("GET", "/health")
      .then(function (h) {
        var list = $("host-warnings");
        var warnings = (h && h.warnings) || [];
        list.textContent = "";
        warnings.forEach(function (w) {
          list.appendChild(L.el("li", null, [String(w)]));
        });
        $("host-health").hidden = warnings.length === 0;
      })
      .catch(fail);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
