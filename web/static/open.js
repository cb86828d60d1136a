/* labd "Open in labd" page (web/open.html, GET /open?repo=&path=): shows the repository,
 * the notebook and what opening them will do, and does nothing more until the user
 * presses "Open": a link is written by someone else, and any page can send a browser
 * here. After the press it starts the user's runtime when it is not running, asks labd
 * to clone or update the repository inside it (POST /api/v1/me/runtime/open), waits
 * for the outcome and goes to the notebook in JupyterLab. When labd left an existing
 * clone as it was (local changes, diverged history), the page says why and lets the
 * user open it anyway. */
(function () {
  "use strict";

  var L = window.labd;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var POLL_MS = 1000;
  var RUNTIME_WAIT_MS = 10 * 60 * 1000;
  var GO = { cloned: true, updated: true, current: true };

  var params = new URLSearchParams(window.location.search);
  var want = { repo: params.get("repo") || "", path: params.get("path") || "" };

  function step(text) {
    $("open-step").textContent = text || "";
  }

  function fail(text) {
    step("");
    L.showMessage("open-error", text);
  }

  function sleep(ms) {
    return new Promise(function (resolve) {
      setTimeout(resolve, ms);
    });
  }

  /* Resolves once the runtime runs; starts a CPU runtime when none is live. */
  function runtimeRunning() {
    var deadline = Date.now() + RUNTIME_WAIT_MS;
    var started = false;
    function check() {
      return L.api("GET", "/me/runtime").then(function (data) {
        var s = data && data.runtime;
        var state = s ? s.state : "none";
        if (state === "running") return null;
        if (Date.now() > deadline) throw new Error("Your runtime did not start in time.");
        if (state === "failed" && started) throw new Error("Your runtime failed to start: " + (s.reason || "no reason given"));
        if (state === "queued" || state === "starting" || state === "stopping") {
          step(state === "queued" ? "Waiting for a free GPU…" : state === "stopping" ? "Your runtime is stopping…" : "Starting your runtime…");
          return sleep(POLL_MS * 2).then(check);
        }
        started = true;
        step("Starting your runtime…");
        return L.api("POST", "/me/runtime", { type: "cpu" })
          .catch(function (err) {
            if (!err || err.code !== "runtime_exists") throw err;
          })
          .then(function () {
            return sleep(POLL_MS).then(check);
          });
      });
    }
    return check();
  }

  function waitOutcome() {
    return L.api("GET", "/me/runtime/open").then(function (data) {
      var o = data && data.open;
      if (o && o.state === "done") return o;
      return sleep(POLL_MS).then(waitOutcome);
    });
  }

  function openRepo() {
    step("Getting the repository into your home…");
    return L.api("POST", "/me/runtime/open", want)
      .catch(function (err) {
        if (err && err.code === "runtime_not_running") return runtimeRunning().then(openRepo);
        if (err && err.code === "open_in_progress") return null;
        throw err;
      })
      .then(waitOutcome);
  }

  function show(o) {
    var go = $("open-go");
    if (o.url) {
      go.href = o.url;
      go.hidden = false;
    }
    if (GO[o.result] && o.notebook_found && o.url) {
      step(o.message + ". Opening the notebook…");
      window.location.assign(o.url);
      return;
    }
    if (o.result === "failed" || o.result === "unsupported") {
      fail(o.message);
      return;
    }
    step("");
    var text = o.message;
    if (!o.notebook_found) text += ". The repository has no " + o.path + "; the button opens its folder.";
    L.showMessage("open-warning", text);
  }

  /* What the press will do, from the runtime's state (a read: nothing starts). */
  function describe() {
    return L.api("GET", "/me/runtime").then(function (data) {
      var s = data && data.runtime;
      var running = s && s.state === "running";
      $("open-runtime").textContent = running
        ? "Your runtime is running: the repository is cloned into it."
        : "Your runtime is not running: labd starts a CPU runtime for you first (it counts against your quota).";
    });
  }

  function onConfirm() {
    var button = $("open-confirm");
    button.disabled = true;
    $("open-plan").hidden = true;
    L.showMessage("open-error", "");
    openRepo()
      .then(function (o) {
        if (o) show(o);
      })
      .catch(function (err) {
        fail(L.errorText(err));
        button.disabled = false;
        $("open-plan").hidden = false;
      });
  }

  function init() {
    $("open-repo").textContent = want.repo;
    $("open-path").textContent = want.path;
    $("open-confirm").addEventListener("click", onConfirm);
    L.loadMe()
      .then(describe)
      .then(function () {
        step("");
        $("open-confirm").disabled = false;
      })
      .catch(function (err) {
        fail(L.errorText(err));
      });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
