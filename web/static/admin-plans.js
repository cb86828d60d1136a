/* labd admin console, plans panel: create, edit and delete plans, named sets of limits
 * (GET/POST /plans, PUT/DELETE /plans/{name}), and the runtime image each plan's
 * runtimes run on (GET /images lists those of [images]). */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var note = A.notices("plans");
  var plans = [];
  var editing = null;

  /* One labelled field per limit, filled from limits (a plan's, or {} for a new one). */
  function renderFields(limits) {
    var box = $("plan-limits");
    box.textContent = "";
    A.LIMITS.forEach(function (l) {
      var input = A.limitInput("plan-limit", l, limits[l.name]);
      box.appendChild(
        L.el("div", { className: "field" }, [
          L.el("label", { htmlFor: input.id }, [l.label]),
          input,
          L.el("span", { className: "hint" }, [l.name]),
        ])
      );
    });
  }

  function summary(limits) {
    var parts = [];
    A.LIMITS.forEach(function (l) {
      if (limits[l.name] !== undefined && limits[l.name] !== null) {
        parts.push(l.label + ": " + A.formatLimit(limits[l.name], l.unit));
      }
    });
    return parts.length ? parts.join("; ") : "no limits set";
  }

  function button(action, label, p, cls) {
    return A.rowButton(action, label, "plan", p.name, cls);
  }

  function render() {
    var tbody = $("plans").tBodies[0];
    tbody.textContent = "";
    if (!plans.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 3, className: "empty" }, ["No plans yet."])]));
      return;
    }
    plans.forEach(function (p) {
      tbody.appendChild(
        L.el("tr", { dataset: { name: p.name } }, [
          L.el("td", null, [p.name]),
          L.el("td", { className: "small" }, [summary(p.limits || {}) + (p.image ? "; image: " + p.image : "") +
            "; preemptible rate: " + p.preemptible_rate + "; GPU device: " + (p.gpu || "whole")]),
          L.el("td", null, [
            L.el("div", { className: "actions" }, [button("edit", "Edit", p), button("delete", "Delete", p, "danger")]),
          ]),
        ])
      );
    });
  }

  function load() {
    return L.api("GET", "/plans").then(function (data) {
      plans = (data && data.plans) || [];
      render();
      A.changed({ plans: plans });
    });
  }

  /* The image choices: the host's root, then each configured image (unusable ones say so). */
  function loadImages() {
    return L.api("GET", "/images").then(function (data) {
      var select = $("plan-image");
      while (select.options.length > 1) select.remove(1);
      ((data && data.images) || []).forEach(function (im) {
        select.appendChild(L.el("option", { value: im.name }, [im.name + (im.usable ? "" : " (missing)")]));
      });
    });
  }

  function setEditing(p) {
    editing = p;
    $("plan-name").value = p ? p.name : "";
    $("plan-image").value = p && p.image ? p.image : "";
    $("plan-preemptible-rate").value = p ? String(p.preemptible_rate) : "0.3";
    $("plan-gpu").value = p && p.gpu ? p.gpu : "whole";
    $("plan-name").readOnly = !!p;
    renderFields(p ? p.limits || {} : {});
    $("plan-save").textContent = p ? "Save plan" : "Create plan";
    $("plan-cancel").hidden = !p;
    if (p) $("plan-limit-" + A.LIMITS[0].name).focus();
  }

  function onSubmit(ev) {
    ev.preventDefault();
    var form = ev.currentTarget;
    var name = $("plan-name").value.trim();
    var limits;
    note.clear();
    if (!name) {
      note.fail(new Error("Enter a plan name."));
      $("plan-name").focus();
      return;
    }
    try {
      limits = A.readLimits("plan-limit");
    } catch (e) {
      note.fail(e);
      return;
    }
    var image = $("plan-image").value;
    var rate = Number($("plan-preemptible-rate").value);
    var gpu = $("plan-gpu").value.trim();
    if (!/^(whole|share|[1-9]g\.[1-9][0-9]{0,3}gb)$/.test(gpu)) {
      note.fail(new Error('GPU device must be "whole", "share" or a MIG profile such as "1g.18gb".'));
      $("plan-gpu").focus();
      return;
    }
    var body = { limits: limits, image: image, preemptible_rate: rate, gpu: gpu };
    if (!editing) body.name = name;
    var work = editing
      ? L.api("PUT", "/plans/" + encodeURIComponent(name), body)
      : L.api("POST", "/plans", body);
    A.save({ form: form, work: work, editing: editing, what: "Plan", name: name, note: note,
             stopEditing: function () { setEditing(null); }, reload: load });
  }

  var onClick = A.rowActions({
    what: "Plan", path: "/plans", note: note, reload: load, edit: setEditing,
    editing: function () { return editing; },
    find: function (name) {
      return plans.filter(function (p) { return p.name === name; })[0];
    },
    confirm: function (name) { return "Delete plan " + name + "?"; },
  });

  renderFields({});
  A.ready.then(function () {
    $("plan-form").addEventListener("submit", onSubmit);
    $("plan-cancel").addEventListener("click", function () {
      setEditing(null);
      $("plan-name").focus();
    });
    $("plans").addEventListener("click", onClick);
    loadImages()
      .then(load)
      .catch(function (err) {
        if (!A.unavailable("plans-panel", err)) note.fail(err);
      });
  });
})();
