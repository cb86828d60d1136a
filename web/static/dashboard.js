/* labd dashboard: who am I, the runtime card (with the GPU queue), API tokens, change
 * password. The quota card is dashboard-usage.js. */
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
    var password = $("token-password");
    var body = { name: name };
    /* Sent only when typed: a fresh login needs none (POST /me/tokens). */
    if (password.value) body.password = password.value;
    L.busy(form, true);
    L.api("POST", "/me/tokens", body)
      .then(function (tok) {
        $("new-token").textContent = tok.token;
        $("new-token-name").textContent = "“" + tok.name + "”";
        $("new-token-box").hidden = false;
        input.value = "";
        password.value = "";
        return loadTokens();
      })
      .catch(function (err) {
        var text = L.errorText(err);
        if (err && err.code === "reauth_required") text = "Enter your password to create a token.";
        if (err && err.code === "reauth_failed") text = "That is not your password.";
        L.showMessage("token-error", text);
        if (err && (err.code === "reauth_required" || err.code === "reauth_failed")) password.focus();
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
    var revoke = $("revoke-tokens").checked;
    L.api("POST", "/me/password", {
      current_password: current.value,
      new_password: next.value,
      revoke_tokens: revoke,
    })
      .then(function () {
        form.reset();
        L.showMessage(
          "password-message",
          "Password changed. Your other sessions have been logged out" +
            (revoke ? " and your API tokens revoked." : ".")
        );
        return revoke ? loadTokens() : null;
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

  /* ---- runtime card ---------------------------------------------------------------- */

  var LIVE = { queued: true, starting: true, running: true, stopping: true };
  var SUMMARY = {
    queued: "Waiting for a free GPU…",
    starting: "Your runtime is starting…",
    running: "Your runtime is running.",
    stopping: "Your runtime is stopping…",
    stopped: "Your runtime has stopped.",
    failed: "Your runtime failed.",
  };

  var rt = {
    current: undefined, /* the runtime; undefined: not loaded yet; null: none */
    endsAt: 0, /* local clock (ms) when seconds_left reaches 0, for the countdown */
    tickTimer: null,
    inFlight: false, /* a start/stop request is being sent */
    loading: false,
    loadFailed: false, /* #runtime-error shows a failed poll, cleared by the next good one */
    warnLevel: null, /* the warn_before lead time the banner was last written for */
    follow: null, /* labd.follow of EVENTS_URL: pushed changes, polling while not live */
  };

  var EVENTS_URL = "/api/v1/me/runtime/events";
  var SLOW_POLL_MS = 60000; /* while the event stream is open */
  var EVENTS_RETRY_MS = 30000; /* after the server refused the stream (its Retry-After) */

  function pad2(n) {
    return n < 10 ? "0" + n : String(n);
  }

  /* 3725 -> "1:02:05" */
  function hms(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    var h = Math.floor(seconds / 3600);
    var m = Math.floor((seconds % 3600) / 60);
    return h + ":" + pad2(m) + ":" + pad2(seconds % 60);
  }

  /* Shorter form for the warning: "4:59" under an hour, else "1:02:05". */
  function shortTime(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    if (seconds >= 3600) return hms(seconds);
    return Math.floor(seconds / 60) + ":" + pad2(seconds % 60);
  }

  function secondsLeft() {
    return Math.max(0, Math.ceil((rt.endsAt - Date.now()) / 1000));
  }

  function setRow(id, shown) {
    $(id).hidden = !shown;
  }

  /* The warning banner. It is an alert: its text is written anew (and so announced) only
   * when a new warn_before lead time is passed; the time in it then ticks in a span that
   * is not a live region, so a screen reader does not read it out every second. */
  function showWarning(level, left) {
    var box = $("runtime-warning");
    if (level === null) {
      rt.warnLevel = null;
      L.showMessage(box, "");
      return;
    }
    if (rt.warnLevel !== level || box.hidden) {
      rt.warnLevel = level;
      box.textContent = "";
      box.appendChild(document.createTextNode("Your runtime stops in "));
      box.appendChild(L.el("span", { id: "runtime-warning-time", attrs: { "aria-live": "off" } }, [shortTime(left)]));
      box.appendChild(document.createTextNode(" — save your work."));
      box.hidden = false;
    } else {
      $("runtime-warning-time").textContent = shortTime(left);
    }
  }

  /* Countdown and warning banner; runs every second while a runtime is live. */
  function tick() {
    var s = rt.current;
    /* a queued runtime's clock has not started */
    var live = !!(s && LIVE[s.state]) && s.state !== "queued";
    if (!live) {
      $("runtime-countdown").textContent = "";
      showWarning(null);
      return;
    }
    var left = secondsLeft();
    $("runtime-countdown").textContent = hms(left);
    /* The smallest lead time already passed, if any. */
    var level = null;
    (s.warn_before || []).forEach(function (lead) {
      if (typeof lead === "number" && left < lead && (level === null || lead < level)) level = lead;
    });
    showWarning(s.state === "stopping" ? null : level, left);
  }

  function updateButtons() {
    var s = rt.current;
    var known = s !== undefined;
    var live = !!(s && LIVE[s.state]);
    var busy = rt.inFlight || !known;
    $("start-cpu").disabled = busy || live;
    $("start-gpu").disabled = busy || live;
    $("stop-runtime").disabled =
      busy || !(s && (s.state === "queued" || s.state === "starting" || s.state === "running"));
    $("stop-runtime").textContent = s && s.state === "queued" ? "Leave the queue" : "Stop runtime";
    var open = $("open-runtime");
    if (s && s.state === "running" && s.url) {
      // The runtime's base URL: Jupyter redirects it to its own start page
      // (/lab for JupyterLab, /tree for Notebook 6), whichever kind runs.
      open.href = s.url;
      open.removeAttribute("aria-disabled");
      open.removeAttribute("role");
      open.classList.remove("link-disabled");
    } else {
      open.removeAttribute("href");
      open.setAttribute("role", "link");
      open.setAttribute("aria-disabled", "true");
      open.classList.add("link-disabled");
    }
  }

  function renderRuntime() {
    var s = rt.current;
    var badge = $("runtime-state");
    var status = $("runtime-status");
    $("runtime").setAttribute("aria-busy", s === undefined ? "true" : "false");
    if (!s) {
      badge.hidden = true;
      badge.textContent = "";
      badge.className = "badge state";
      status.dataset.state = s === undefined ? "loading" : "none";
      var summary = $("runtime-summary");
      summary.textContent = "";
      summary.appendChild(L.el("strong", null, [s === undefined ? "Loading your runtime…" : "No runtime yet"]));
      if (s === null) summary.appendChild(document.createTextNode(" — start one to work in Jupyter."));
      $("runtime-facts").hidden = true;
      L.showMessage("runtime-reason", "");
      updateButtons();
      tick();
      return;
    }
    var state = String(s.state);
    var live = !!LIVE[state];
    badge.textContent = state;
    badge.className = "badge state state-" + state;
    badge.hidden = false;
    status.dataset.state = state;
    $("runtime-summary").textContent = SUMMARY[state] || "Runtime state: " + state;

    $("runtime-type").textContent = s.type === "gpu" ? "GPU" : s.type === "cpu" ? "CPU" : String(s.type || "");
    $("runtime-started").textContent = L.formatTime(s.started_at);
    $("runtime-ended").textContent = L.formatTime(s.ended_at);
    setRow("runtime-ended-row", !live && !!s.ended_at);
    setRow("runtime-countdown-row", live && state !== "queued");
    renderQueue(s);
    var gpus = Array.isArray(s.gpus) ? s.gpus : [];
    $("runtime-gpus").textContent = gpus.join(", ");
    setRow("runtime-gpus-row", gpus.length > 0);
    $("runtime-facts").hidden = false;

    var reason = (state === "failed" || state === "stopped") && s.reason ? String(s.reason) : "";
    L.showMessage("runtime-reason", reason ? (state === "failed" ? "Why: " : "Reason: ") + reason : "");

    updateButtons();
    tick();
  }

  /* While queued: the position, when it joined, the estimated start and when the request
   * expires (the runtime's "queue" object). */
  function renderQueue(s) {
    var q = s && s.state === "queued" ? s.queue : null;
    /* on a Slurm cluster a starting runtime may wait for its allocation there */
    var sq = s && s.state === "starting" ? s.slurm : null;
    setRow("runtime-queue-row", !!(q || sq));
    $("runtime-started-row").querySelector("dt").textContent = q ? "Queued" : "Started";
    if (sq) {
      $("runtime-queue-position").textContent = sq.reason;
      $("runtime-queue-detail").textContent = sq.estimate_start_at
        ? "Slurm estimates the start at " + L.formatTime(sq.estimate_start_at) : "no estimate from Slurm yet";
      return;
    }
    if (!q) return;
    $("runtime-queue-position").textContent = "Position " + q.position + " in the GPU queue";
    var parts = ["waiting since " + L.formatTime(q.queued_at)];
    parts.push(q.estimate_start_at ? "estimated start " + L.formatTime(q.estimate_start_at) : "no estimate yet");
    if (q.expires_at) parts.push("gives up at " + L.formatTime(q.expires_at));
    $("runtime-queue-detail").textContent = parts.join(" · ");
  }

  function setRuntime(runtime) {
    var before = rt.current ? rt.current.id + ":" + rt.current.state : "";
    rt.current = runtime || null;
    var after = rt.current ? rt.current.id + ":" + rt.current.state : "";
    /* The quota card (dashboard-usage.js) refreshes when the runtime starts or ends. */
    if (before !== after) document.dispatchEvent(new CustomEvent("labd:runtime", { detail: rt.current }));
    if (rt.current && LIVE[rt.current.state]) {
      rt.endsAt = Date.now() + Math.max(0, Number(rt.current.seconds_left) || 0) * 1000;
    } else {
      rt.endsAt = 0;
    }
    renderRuntime();
    if (rt.current && LIVE[rt.current.state]) {
      if (!rt.tickTimer) rt.tickTimer = setInterval(tick, 1000);
    } else if (rt.tickTimer) {
      clearInterval(rt.tickTimer);
      rt.tickTimer = null;
    }
  }

  /* Reads the runtime; resolves to the ms until the next read while the stream is not live. */
  function loadRuntime() {
    return L.api("GET", "/me/runtime")
      .then(function (data) {
        if (rt.loadFailed) {
          rt.loadFailed = false;
          L.showMessage("runtime-error", "");
        }
        setRuntime(data ? data.runtime : null);
      })
      .catch(function (err) {
        /* Keep what we showed; say why it may be stale. */
        rt.loadFailed = true;
        L.showMessage("runtime-error", "Could not load the runtime: " + L.errorText(err));
        if (rt.current === undefined) setRuntime(null);
      })
      .then(function () {
        var s = rt.current;
        var fast = s && (s.state === "queued" || s.state === "starting" || s.state === "stopping");
        return fast ? 2000 : 10000;
      });
  }

  /* Live updates: each "runtime" event carries what GET /me/runtime answers. While the
   * stream is down (reconnecting, refused with 429, or no EventSource) polling goes on. */
  function onRuntimeEvent(data) {
    if (!data || typeof data !== "object") return; /* a bad event: the next, or a poll, brings it */
    if (rt.loadFailed) {
      rt.loadFailed = false;
      L.showMessage("runtime-error", "");
    }
    setRuntime(data ? data.runtime : null);
  }

  /* Start (POST) or stop (DELETE); the reply carries the runtime. */
  function runtimeRequest(method, body) {
    rt.inFlight = true;
    rt.loadFailed = false;
    updateButtons();
    L.showMessage("runtime-error", "");
    return L.api(method, "/me/runtime", body)
      .then(function (data) {
        rt.inFlight = false;
        if (data && data.runtime) setRuntime(data.runtime);
        else updateButtons();
      })
      .catch(function (err) {
        rt.inFlight = false;
        L.showMessage("runtime-error", L.errorText(err));
        updateButtons();
      })
      .then(function () {
        return rt.follow.poll();
      });
  }

  function onStart(type) {
    return function () {
      runtimeRequest("POST", { type: type });
    };
  }

  function onStop() {
    runtimeRequest("DELETE");
  }

  function initRuntime() {
    $("start-cpu").addEventListener("click", onStart("cpu"));
    $("start-gpu").addEventListener("click", onStart("gpu"));
    $("stop-runtime").addEventListener("click", onStop);
    $("open-runtime").addEventListener("click", function (ev) {
      if (this.getAttribute("aria-disabled") === "true") ev.preventDefault();
    });
    renderRuntime();
  }

  /* The courses that end soon (GET /me course_ends): what happens then, and
   * what to do before. */
  function showCourseEnds(ends) {
    var box = $("course-notice");
    box.textContent = "";
    (ends || []).forEach(function (e) {
      var when = L.formatTime(e.expires_at);
      box.appendChild(
        L.el("p", null, [
          "Your course " + e.group + " ends on " + when +
            ": your runtime will stop and your account will be disabled. " +
            "Download the files you want to keep before then.",
        ])
      );
    });
    box.hidden = !box.childNodes.length;
  }

  function init() {
    $("token-form").addEventListener("submit", onCreateToken);
    $("tokens").addEventListener("click", onTokensClick);
    $("password-form").addEventListener("submit", onChangePassword);
    L.wireCopy($("new-token-copy"), $("new-token"));
    initRuntime();

    L.loadMe()
      .then(function (me) {
        showCourseEnds(me.course_ends);
        rt.follow = L.follow(EVENTS_URL, { runtime: onRuntimeEvent }, {
          poll: loadRuntime,
          slowMs: SLOW_POLL_MS,
          retryMs: EVENTS_RETRY_MS,
        });
        rt.follow.poll();
        return loadTokens();
      })
      .catch(function (err) {
        L.showMessage("page-error", L.errorText(err));
      });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
