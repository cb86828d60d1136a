/* labd admin console, groups panel: create, edit (plan, members, the course's end)
 * and delete groups (GET/POST /groups, PUT/DELETE /groups/{name}). */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var note = A.notices("groups");
  var groups = [];
  var editing = null; /* the group being edited, or null: the form creates */

  function members(text) {
    return String(text || "")
      .split(/[\s,]+/)
      .filter(function (s) {
        return s;
      });
  }

  function fillPlans(plans) {
    var select = $("group-plan");
    var keep = select.value;
    select.textContent = "";
    select.appendChild(L.el("option", { value: "" }, ["No plan"]));
    plans.forEach(function (p) {
      select.appendChild(L.el("option", { value: p.name }, [p.name]));
    });
    select.value = plans.some(function (p) {
      return p.name === keep;
    })
      ? keep
      : "";
  }

  /* "2026-07-31" of an expires_at ("2026-07-31T00:00:00Z"), or "". */
  function day(expiresAt) {
    return expiresAt ? String(expiresAt).slice(0, 10) : "";
  }

  function ends(g) {
    if (!g.expires_at) return "—";
    return day(g.expires_at) + (g.ended ? " (ended)" : "");
  }

  function button(action, label, g, cls) {
    return A.rowButton(action, label, "group", g.name, cls);
  }

  function render() {
    var tbody = $("groups").tBodies[0];
    tbody.textContent = "";
    if (!groups.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 5, className: "empty" }, ["No groups yet."])]));
      return;
    }
    groups.forEach(function (g) {
      tbody.appendChild(
        L.el("tr", { dataset: { name: g.name } }, [
          L.el("td", null, [g.name]),
          L.el("td", null, [g.plan || "—"]),
          L.el("td", { className: "members" }, [(g.members || []).join(", ") || "—"]),
          L.el("td", null, [ends(g)]),
          L.el("td", null, [
            L.el("div", { className: "actions" }, [button("edit", "Edit", g), button("delete", "Delete", g, "danger")]),
          ]),
        ])
      );
    });
  }

  function load() {
    return L.api("GET", "/groups").then(function (data) {
      groups = (data && data.groups) || [];
      render();
      A.changed({ groups: groups });
    });
  }

  function setEditing(g) {
    editing = g;
    $("group-name").value = g ? g.name : "";
    $("group-name").readOnly = !!g;
    $("group-plan").value = g && g.plan ? g.plan : "";
    $("group-members").value = g ? (g.members || []).join(", ") : "";
    $("group-expires").value = g ? day(g.expires_at) : "";
    $("group-save").textContent = g ? "Save group" : "Create group";
    $("group-cancel").hidden = !g;
    if (g) $("group-plan").focus();
  }

  function onSubmit(ev) {
    ev.preventDefault();
    var form = ev.currentTarget;
    var name = $("group-name").value.trim();
    var plan = $("group-plan").value || null;
    var list = members($("group-members").value);
    var expires = $("group-expires").value || null;
    var work, change;
    note.clear();
    if (!name) {
      note.fail(new Error("Enter a group name."));
      $("group-name").focus();
      return;
    }
    if (editing) {
      var before = editing.members || [];
      change = {
        plan: plan,
        add_members: list.filter(function (m) {
          return before.indexOf(m) < 0;
        }),
        remove_members: before.filter(function (m) {
          return list.indexOf(m) < 0;
        }),
      };
      /* sent only when changed: a new end starts the course again */
      if ((expires || "") !== day(editing.expires_at)) change.expires_at = expires;
      work = L.api("PUT", "/groups/" + encodeURIComponent(name), change);
    } else {
      work = L.api("POST", "/groups", { name: name, plan: plan, members: list, expires_at: expires });
    }
    A.save({ form: form, work: work, editing: editing, what: "Group", name: name, note: note,
             stopEditing: function () { setEditing(null); }, reload: load });
  }

  var onClick = A.rowActions({
    what: "Group", path: "/groups", note: note, reload: load, edit: setEditing,
    editing: function () { return editing; },
    find: function (name) {
      return groups.filter(function (g) { return g.name === name; })[0];
    },
    confirm: function (name) { return "Delete group " + name + "? Its members keep their accounts."; },
  });

  A.onChanged(function (what) {
    if (what.plans) fillPlans(what.plans);
    if (what.quota) load().catch(note.fail); /* memberships may have changed */
  });

  A.ready.then(function () {
    $("group-form").addEventListener("submit", onSubmit);
    $("group-cancel").addEventListener("click", function () {
      setEditing(null);
      $("group-name").focus();
    });
    $("groups").addEventListener("click", onClick);
    load().catch(function (err) {
      if (!A.unavailable("groups-panel", err)) note.fail(err);
    });
  });
})();
