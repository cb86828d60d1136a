/* labd admin console, user quota panel: a user's own plan, group memberships and
 * per-user overrides (GET/PUT /users/{name}/quota, PUT /groups/{name} for members). */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var note = A.notices("quota");
  var known = { users: [], plans: [], groups: [] };
  var current = null; /* the quota answer being edited */

  function fillSelect(select, names, value, noneLabel) {
    var keep = value === undefined ? select.value : value;
    select.textContent = "";
    if (noneLabel) select.appendChild(L.el("option", { value: "" }, [noneLabel]));
    names.forEach(function (n) {
      select.appendChild(L.el("option", { value: n }, [n]));
    });
    if (keep !== null && names.indexOf(keep) >= 0) select.value = keep;
    else if (noneLabel) select.value = "";
  }

  function sourceText(l) {
    if (l.source === "override") return "override";
    if (l.source === "plan") return "plan " + l.plan;
    if (l.source === "group") return "group " + l.group + " (plan " + l.plan + ")";
    return "default";
  }

  function renderGroups(memberOf) {
    var box = $("quota-groups");
    box.textContent = "";
    if (!known.groups.length) {
      box.appendChild(L.el("p", { className: "muted small" }, ["No groups yet."]));
      return;
    }
    known.groups.forEach(function (g) {
      var id = "quota-group-" + g.name;
      box.appendChild(
        L.el("label", { className: "check", htmlFor: id }, [
          L.el("input", { type: "checkbox", id: id, value: g.name, checked: memberOf.indexOf(g.name) >= 0 }),
          " " + g.name,
        ])
      );
    });
  }

  function render(q) {
    current = q;
    fillSelect($("quota-plan"), known.plans.map(function (p) {
      return p.name;
    }), q.plan, "None (groups or default decide)");
    renderGroups(q.groups || []);
    var tbody = $("quota-limits").tBodies[0];
    tbody.textContent = "";
    A.LIMITS.forEach(function (l) {
      var eff = (q.limits || {})[l.name] || {};
      var value = eff.value === null ? "unlimited" : A.formatLimit(eff.value, l.unit);
      var input = A.limitInput("quota-ov", l, (q.overrides || {})[l.name]);
      input.setAttribute("aria-label", "Override: " + l.label);
      tbody.appendChild(
        L.el("tr", { dataset: { limit: l.name } }, [
          L.el("th", { scope: "row" }, [l.label, L.el("span", { className: "muted small block" }, [l.name])]),
          L.el("td", { className: "effective" }, [value]),
          L.el("td", null, [sourceText(eff)]),
          L.el("td", null, [input]),
        ])
      );
    });
    $("quota-form").hidden = false;
    $("quota-form").dataset.user = q.user;
  }

  /* keep: a refresh because another panel changed something; what this panel said
   * (its "saved", its error) stays. A save's own group changes reload the groups
   * panel, whose reload comes back here: clearing then wiped the save's message. */
  function load(name, keep) {
    if (!keep) note.clear();
    return L.api("GET", "/users/" + encodeURIComponent(name) + "/quota").then(render);
  }

  /* Membership changes, one PUT per group whose box was ticked or cleared. */
  function saveGroups(name) {
    var before = (current && current.groups) || [];
    var work = Promise.resolve();
    known.groups.forEach(function (g) {
      var box = $("quota-group-" + g.name);
      if (!box) return;
      var was = before.indexOf(g.name) >= 0;
      if (box.checked === was) return;
      var body = box.checked ? { add_members: [name] } : { remove_members: [name] };
      work = work.then(function () {
        return L.api("PUT", "/groups/" + encodeURIComponent(g.name), body);
      });
    });
    return work;
  }

  function onSave(ev) {
    ev.preventDefault();
    var form = ev.currentTarget;
    var name = form.dataset.user;
    var overrides;
    note.clear();
    try {
      overrides = A.readLimits("quota-ov");
    } catch (e) {
      note.fail(e);
      return;
    }
    var plan = $("quota-plan").value || null;
    L.busy(form, true);
    L.api("PUT", "/users/" + encodeURIComponent(name) + "/quota", { plan: plan, overrides: overrides })
      .then(function () {
        return saveGroups(name);
      })
      .then(function () {
        A.changed({ quota: name });
        return load(name);
      })
      .then(function () {
        note.ok("Quota of " + name + " saved.");
      })
      .catch(note.fail)
      .then(function () {
        L.busy(form, false);
      });
  }

  function onPick(ev) {
    ev.preventDefault();
    var name = $("quota-user").value;
    if (name) load(name).catch(note.fail);
  }

  A.onChanged(function (what) {
    if (what.users) {
      known.users = what.users;
      fillSelect($("quota-user"), what.users.map(function (u) {
        return u.name;
      }));
    }
    if (what.editQuota) {
      $("quota-user").value = what.editQuota;
      load(what.editQuota)
        .then(function () {
          $("quota-plan").focus();
        })
        .catch(note.fail);
    }
    if (what.plans) known.plans = what.plans;
    if (what.groups) known.groups = what.groups;
    /* A plan or group change shows in the open editor at once. */
    if ((what.plans || what.groups) && current && !$("quota-form").hidden) load(current.user, true).catch(note.fail);
  });

  A.ready.then(function () {
    $("quota-pick").addEventListener("submit", onPick);
    $("quota-form").addEventListener("submit", onSave);
  });
})();
