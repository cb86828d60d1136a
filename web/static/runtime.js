/* labd runtime page (web/runtime.html): served with status 503 at /user/<name>/... while
 * that runtime is not running. Shows the state, starts a CPU runtime, waits until it is
 * running and reloads the address the user asked for, which then reaches Jupyter. */
(function () {
  "use strict";

  var L = window.labd;
  var $ = function (id) {
    return document.getElementById(id);
  };
  var LIVE = { starting: true, running: true, stopping: true };
  var RELOAD_KEY = "labd.runtime.reloaded";
  var POLL_MS = 2000;
  var SLOW_POLL_MS = 60000; /* while the event stream is open */
  var EVENTS_URL = "/api/v1/me/runtime/events";

  var me = null;
  var owner = null; /* <name> of /user/<name>/... */
  var runtime;
  var follower = null; /* labd.follow: the event stream (our own runtime) and polling */
  var waiting = false; /* we started it (or it was starting): go to Jupyter when running */
  var starting = false; /* the POST is in flight */

  function pathOwner() {
    var m = /^\/user\/([^/]+)\//.exec(window.location.pathname + "/");
    if (!m) return null;
    try {
      return decodeURIComponent(m[1]);
    } catch (e) {
      return m[1];
    }
  }

  function say(text) {
    $("runtime-message").textContent = text || "";
  }

  /* Reload the original URL once the runtime runs; never in a tight loop (if labd
   * still answers 503 for a running runtime, the user gets a button instead). */
  function goToJupyter() {
    var last = 0;
    try {
      last = Number(window.sessionStorage.getItem(RELOAD_KEY)) || 0;
    } catch (e) {
      last = 0;
    }
    if (Date.now() - last < 15000) {
      say("Your runtime is running. Open Jupyter to continue.");
      $("reload").hidden = false;
      return;
    }
    try {
      window.sessionStorage.setItem(RELOAD_KEY, String(Date.now()));
    } catch (e) {
      /* no storage: reload anyway */
    }
    say("Your runtime is running. Opening Jupyter…");
    window.location.reload();
  }

  function render() {
    var s = runtime;
    var state = s ? String(s.state) : "none";
    var badge = $("runtime-state");
    badge.textContent = s ? state : "no runtime";
    badge.className = "badge state state-" + state;
    $("runtime-status").dataset.state = s ? state : "none";

    var reason = s && (state === "failed" || state === "stopped") && s.reason ? String(s.reason) : "";
    L.showMessage("runtime-reason", reason ? (state === "failed" ? "Why: " : "Reason: ") + reason : "");

    var mine = !owner || (me && me.name === owner);
    var live = !!(s && LIVE[state]);
    var start = $("start-cpu");
    start.hidden = !mine;
    start.disabled = !mine || starting || live;

    var title = $("runtime-title");
    if (mine && state === "starting") title.textContent = "Your runtime is starting";
    else if (mine && state === "running") title.textContent = "Your runtime is running";
    else title.textContent = mine ? "Your runtime is not running" : "This runtime is not running";

    if (!mine) {
      say("Only " + owner + " can start this runtime.");
    } else if (state === "starting") {
      say("Starting your runtime… you will be taken to Jupyter when it is ready.");
    } else if (state === "stopping") {
      say("Your runtime is stopping; you can start it again in a moment.");
    } else if (state === "running") {
      if (waiting) goToJupyter();
      else {
        say("Your runtime is running. Open Jupyter to continue.");
        $("reload").hidden = false;
      }
    } else if (state === "failed") {
      say("The last runtime failed to run. You can try again.");
    } else if (!starting) {
      say("");
    }
  }

  function follow(session) {
    runtime = session;
    if (runtime && runtime.state === "starting") waiting = true;
    if (runtime && (runtime.state === "failed" || runtime.state === "stopped")) waiting = false;
    render();
  }

  /* Reads the runtime; resolves to the ms until the next read while no stream is live. */
  function poll() {
    return L.api("GET", "/me/runtime")
      .then(function (data) {
        follow(data ? data.runtime : null);
      })
      .catch(function (err) {
        L.showMessage("runtime-error", "Could not load the runtime: " + L.errorText(err));
      })
      .then(function () {
        var s = runtime;
        var state = s && s.state;
        if (state === "running" && waiting) return 0; /* reloading */
        /* Keep watching while something is happening; slowly otherwise. */
        return state === "starting" || state === "stopping" ? POLL_MS : 10000;
      });
  }

  /* The runtime's state pushed as it changes (our own runtime only: the stream is the
   * caller's); polling stays as the fallback. */
  function onRuntimeEvent(data) {
    if (data && typeof data === "object") follow(data.runtime);
  }

  function onStart() {
    starting = true;
    render();
    L.showMessage("runtime-error", "");
    say("Starting your runtime…");
    L.api("POST", "/me/runtime", { type: "cpu" })
      .then(function (data) {
        waiting = true;
        if (data && data.runtime) {
          runtime = data.runtime;
          if (runtime.state === "failed") waiting = false;
        }
      })
      .catch(function (err) {
        if (err && err.code === "runtime_exists") {
          waiting = true; /* already live: follow it */
        } else {
          L.showMessage("runtime-error", L.errorText(err));
        }
      })
      .then(function () {
        starting = false;
        render();
        return follower ? follower.poll() : null;
      });
  }

  function init() {
    owner = pathOwner();
    $("start-cpu").addEventListener("click", onStart);
    $("reload").addEventListener("click", function () {
      try {
        window.sessionStorage.removeItem(RELOAD_KEY);
      } catch (e) {
        /* ignore */
      }
      window.location.reload();
    });
    L.loadMe()
      .then(function (who) {
        me = who;
        var mine = !owner || owner === me.name;
        follower = L.follow(mine ? EVENTS_URL : null, { runtime: onRuntimeEvent }, {
          poll: poll,
          slowMs: SLOW_POLL_MS,
          retryMs: POLL_MS,
        });
        return follower.poll();
      })
      .catch(function (err) {
        L.showMessage("runtime-error", L.errorText(err));
      });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
