/* labd admin console, import panel: users from a CSV (POST /users/import). Check
 * runs a dry run and shows each row's result; Import is offered only when every
 * row is good, and creates all of them or none. */
(function () {
  "use strict";

  var L = window.labd;
  var A = window.labdAdmin;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var note = A.notices("import");
  var checked = null; /* the CSV text whose dry run found every row good */

  function render(result) {
    var tbody = $("import-rows").tBodies[0];
    tbody.textContent = "";
    result.rows.forEach(function (r) {
      var text = r.ok ? "ok" : r.column + ": " + r.error;
      tbody.appendChild(
        L.el("tr", { className: r.ok ? "" : "bad" }, [
          L.el("td", null, [String(r.row)]),
          L.el("td", null, [r.name || "—"]),
          L.el("td", null, [text]),
        ])
      );
    });
    $("import-result").hidden = false;
  }

  function send(text, dryRun) {
    return L.api("POST", "/users/import", { csv: text, dry_run: dryRun });
  }

  function check(ev) {
    if (ev) ev.preventDefault();
    var text = $("import-text").value;
    note.clear();
    checked = null;
    $("import-run").disabled = true;
    if (!text.trim()) {
      note.fail(new Error("Choose a CSV file or paste one."));
      return Promise.resolve();
    }
    return send(text, true)
      .then(function (result) {
        render(result);
        if (result.bad) {
          note.fail(new Error(result.bad + " of " + result.rows.length + " rows are bad: fix them and check again."));
          return;
        }
        checked = text;
        $("import-run").disabled = false;
        note.ok("All " + result.rows.length + " rows are good. Import creates them.");
      })
      .catch(note.fail);
  }

  function run() {
    if (checked === null || checked !== $("import-text").value) return check();
    $("import-run").disabled = true;
    return send(checked, false)
      .then(function (result) {
        render(result);
        checked = null;
        note.ok(result.created + " users created.");
        A.changed({ imported: true, quota: true });
      })
      .catch(function (err) {
        note.fail(err);
        return check(); /* the store changed since the check: show which rows now fail */
      });
  }

  function onFile() {
    var file = $("import-file").files[0];
    if (!file) return;
    file.text().then(function (text) {
      $("import-text").value = text;
      return check();
    });
  }

  A.ready.then(function () {
    $("import-form").addEventListener("submit", check);
    $("import-run").addEventListener("click", run);
    $("import-file").addEventListener("change", onFile);
    $("import-text").addEventListener("input", function () {
      checked = null;
      $("import-run").disabled = true;
    });
  });
})();
