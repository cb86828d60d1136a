/* labd admin console, storage panel: each user's home against its quota, from the
 * "storage" of GET /users/{name}/quota; where a labd does not report it yet, the quota
 * alone, with the use marked as not measured. */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };

  function quotaOf(q) {
    if (q.storage && q.storage.quota_bytes !== undefined) return q.storage.quota_bytes;
    var l = q.limits && q.limits.storage_bytes;
    return l ? l.value : null;
  }

  function row(q) {
    var used = q.storage ? q.storage.used_bytes : null;
    var quota = quotaOf(q);
    var share = L.el("span", { className: "muted small" }, ["not measured"]);
    if (used !== null && used !== undefined && quota) {
      var pct = Math.min(100, Math.round((used / quota) * 100));
      share = L.el("div", { className: "bar-cell" }, [
        L.el("progress", {
          max: quota,
          value: Math.min(used, quota),
          attrs: { "aria-label": "Storage of " + q.user + ": " + pct + " % of the quota" },
        }),
        L.el("span", { className: "small" }, [pct + " %"]),
      ]);
    }
    return L.el("tr", { dataset: { user: q.user } }, [
      L.el("td", null, [q.user]),
      L.el("td", { className: "used" }, [used === null || used === undefined ? "—" : L.bytes(used)]),
      L.el("td", { className: "quota" }, [quota === null || quota === undefined ? "unlimited" : L.bytes(quota)]),
      L.el("td", null, [share]),
    ]);
  }

  function load(users) {
    return Promise.all(
      users.map(function (u) {
        return L.api("GET", "/users/" + encodeURIComponent(u.name) + "/quota");
      })
    )
      .then(function (quotas) {
        var tbody = $("storage").tBodies[0];
        tbody.textContent = "";
        if (!quotas.length) {
          tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 4, className: "empty" }, ["No users."])]));
        }
        quotas.forEach(function (q) {
          tbody.appendChild(row(q));
        });
      })
      .catch(function (err) {
        if (!A.unavailable("storage-panel", err)) L.showMessage("storage-error", L.errorText(err));
      });
  }

  var users = [];
  A.onChanged(function (what) {
    if (what.users) users = what.users;
    if (what.users || what.quota || what.plans || what.groups) load(users);
  });
})();
