/* labd web UI: helpers shared by every page (the API, the DOM, the formats of times,
 * durations and sizes, and following an event stream).
 * Plain browser JavaScript, no build step. Loaded before the page's own script. */
(function () {
  "use strict";

  var API = "/api/v1";
  var csrfToken = null;

  /* An API error carrying the HTTP status and the {"error":{code,message,field}} body
   * (field: the request field the error names, when it names one). */
  function ApiError(status, code, message, field) {
    this.name = "ApiError";
    this.status = status;
    this.code = code || "error";
    this.field = field || null;
    this.message = message || "Request failed (HTTP " + status + ").";
  }
  ApiError.prototype = Object.create(Error.prototype);
  ApiError.prototype.constructor = ApiError;

  /* Where we are, for ?next= after a new login. */
  function currentPath() {
    return window.location.pathname + window.location.search;
  }

  function toLogin() {
    window.location.assign("/login?next=" + encodeURIComponent(currentPath()));
  }

  /* fetch() wrapper: JSON in, JSON out, CSRF header on state-changing requests,
   * a 401 sends the browser to the login page. Resolves with the parsed body
   * (null for 204), rejects with ApiError. */
  function api(method, path, body) {
    var headers = { Accept: "application/json" };
    var init = { method: method, credentials: "same-origin", headers: headers, cache: "no-store" };
    if (method !== "GET" && method !== "HEAD") {
      headers["Content-Type"] = "application/json";
      if (csrfToken) headers["X-CSRF-Token"] = csrfToken;
      init.body = JSON.stringify(body === undefined ? {} : body);
    }
    return fetch(API + path, init).then(
      function (res) {
        if (res.status === 401) {
          toLogin();
          /* Never settles: the page is going away. */
          return new Promise(function () {});
        }
        if (res.status === 204) return null;
        return res.text().then(function (text) {
          var data = null;
          if (text) {
            try {
              data = JSON.parse(text);
            } catch (e) {
              data = null;
            }
          }
          if (!res.ok) {
            var err = data && data.error ? data.error : {};
            throw new ApiError(res.status, err.code, err.message, err.field);
          }
          return data;
        });
      },
      function () {
        throw new ApiError(0, "network", "Cannot reach labd. Check your connection and try again.");
      }
    );
  }

  /* Loads the signed-in user, remembers the CSRF token, fills the header bar
   * (#whoami, #admin-link, the log-out form's csrf_token). */
  function loadMe() {
    return api("GET", "/me").then(function (me) {
      csrfToken = me.csrf_token || null;
      var who = document.getElementById("whoami");
      if (who) who.textContent = "Signed in as " + me.name;
      var adminLink = document.getElementById("admin-link");
      if (adminLink) adminLink.hidden = me.role !== "admin";
      var account = document.getElementById("password-username");
      if (account) account.defaultValue = account.value = me.name;
      var field = document.getElementById("logout-csrf");
      if (field) field.value = csrfToken || "";
      var logout = document.getElementById("logout");
      if (logout) logout.disabled = false;
      return me;
    });
  }

  /* Shows a message in an alert region (role="alert"); empty text hides it. */
  function showMessage(el, text) {
    if (typeof el === "string") el = document.getElementById(el);
    if (!el) return;
    el.textContent = text || "";
    el.hidden = !text;
  }

  function errorText(err) {
    if (err && err.message) return err.message;
    return "Something went wrong.";
  }

  /* "2026-12-02T16:00:00Z" -> local "2026-12-02 17:00"; anything else as is. */
  function formatTime(value) {
    if (!value) return "never";
    var d = new Date(value);
    if (isNaN(d.getTime())) return String(value);
    function pad(n) {
      return n < 10 ? "0" + n : String(n);
    }
    return (
      d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes())
    );
  }

  var DURATION_UNITS = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  var BYTE_UNITS = [["TiB", 1099511627776], ["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024]];

  /* Seconds as the UI writes them everywhere: 5400 -> "1 h 30 min", 3725 -> "1 h 2 min 5 s",
   * 90000 -> "1 d 1 h", 0 -> "0 s" (whole seconds, zero units left out; exact, so an admin
   * field shows it and reads it back); not a number -> "—". */
  function duration(seconds) {
    if (seconds === null || seconds === undefined || seconds === "" || isNaN(Number(seconds))) return "—";
    var v = Math.max(0, Math.round(Number(seconds)));
    var parts = [];
    DURATION_UNITS.forEach(function (u) {
      if (v >= u[1]) {
        parts.push(Math.floor(v / u[1]) + " " + u[0]);
        v %= u[1];
      }
    });
    return parts.length ? parts.join(" ") : "0 s";
  }

  /* Bytes: 2147483648 -> "2 GiB", 16434331648 -> "15.3 GiB", 512 -> "512 B"; not a number -> "—". */
  function bytes(n) {
    if (n === null || n === undefined || n === "" || isNaN(Number(n))) return "—";
    n = Number(n);
    for (var i = 0; i < BYTE_UNITS.length; i++) {
      var u = BYTE_UNITS[i];
      if (n >= u[1]) return (n / u[1]).toFixed(1).replace(/\.0$/, "") + " " + u[0];
    }
    return n + " B";
  }

  /* Follows an event stream, and polls while it is not live: the one rule of every page.
   *  - url: the stream's address, or a function giving it (asked again at each reopen, so a
   *    log goes on from its offset); null: polling only.
   *  - events: {name: function (data, ev)}; data is the event's JSON, or its text when it is
   *    not JSON. An "end" event stops the following for good, after its handler.
   *  - opts.poll(): reads the state another way; it may resolve to the ms until the next poll
   *    while the stream is not live (connecting, refused, no EventSource; default retryMs,
   *    0: no next poll). While the stream is live it runs every opts.slowMs (0: never).
   *  - The browser reconnects a dropped stream itself, with Last-Event-ID; one it gave up on
   *    (refused with 429 or 503, say) is opened again after opts.retryMs (2 s).
   *  - opts.onLive(live): the stream went live, or stopped being live.
   *  - Back in the tab after it was hidden, it polls at once.
   * Returns {poll: poll now, close: stop for good, live: whether the stream is live}. */
  function follow(url, events, opts) {
    opts = opts || {};
    var retryMs = opts.retryMs || 2000;
    var slowMs = opts.slowMs || 0;
    var es = null;
    var isLive = false;
    var closed = false;
    var timer = null;
    var reopenTimer = null;
    var polling = false;
    var nextMs = retryMs;

    function schedule() {
      clearTimeout(timer);
      timer = null;
      var ms = isLive ? slowMs : nextMs;
      if (!closed && opts.poll && ms > 0) timer = setTimeout(poll, ms);
    }

    function poll() {
      clearTimeout(timer);
      timer = null;
      if (closed || !opts.poll || polling) return Promise.resolve();
      polling = true;
      return Promise.resolve()
        .then(opts.poll)
        .then(
          function (ms) {
            nextMs = typeof ms === "number" ? ms : retryMs;
          },
          function () {
            nextMs = retryMs;
          }
        )
        .then(function () {
          polling = false;
          schedule();
        });
    }

    function setLive(on) {
      if (isLive === on) return;
      isLive = on;
      if (opts.onLive) opts.onLive(on);
      schedule();
    }

    function listen(s, name, fn) {
      s.addEventListener(name, function (ev) {
        if (s !== es) return;
        var data = ev.data;
        try {
          data = JSON.parse(ev.data);
        } catch (e) {
          /* not JSON: the text as it came */
        }
        if (fn) fn(data, ev);
        if (name === "end") close();
      });
    }

    function open() {
      reopenTimer = null;
      var where = typeof url === "function" ? url() : url;
      if (closed || !where || !window.EventSource) return;
      var s = new EventSource(where);
      es = s;
      Object.keys(events || {}).forEach(function (name) {
        if (name !== "end") listen(s, name, events[name]);
      });
      listen(s, "end", events && events.end);
      s.addEventListener("open", function () {
        if (s === es) setLive(true);
      });
      s.addEventListener("error", function () {
        if (s !== es) return;
        if (s.readyState === EventSource.CLOSED) {
          es = null;
          reopenTimer = setTimeout(open, retryMs);
        }
        setLive(false);
      });
    }

    function close() {
      closed = true;
      if (es) es.close();
      es = null;
      clearTimeout(timer);
      clearTimeout(reopenTimer);
      setLive(false);
    }

    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && !closed) poll();
    });
    open();
    schedule();
    return {
      poll: poll,
      close: close,
      live: function () {
        return isLive;
      },
    };
  }

  /* Small DOM builder: el("td", {className: "x"}, ["text", child]). */
  function el(tag, props, children) {
    var node = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (k) {
        if (k === "dataset") {
          Object.keys(props.dataset).forEach(function (d) {
            node.dataset[d] = props.dataset[d];
          });
        } else if (k === "attrs") {
          Object.keys(props.attrs).forEach(function (a) {
            node.setAttribute(a, props.attrs[a]);
          });
        } else {
          node[k] = props[k];
        }
      });
    }
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }

  /* Copy-to-clipboard button next to a secret. */
  function wireCopy(button, source) {
    if (!button) return;
    if (!navigator.clipboard) {
      button.hidden = true;
      return;
    }
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(source.textContent).then(
        function () {
          button.textContent = "Copied";
          setTimeout(function () {
            button.textContent = "Copy";
          }, 1500);
        },
        function () {
          button.textContent = "Copy failed";
        }
      );
    });
  }

  /* Disables a form's submit button while a request runs. */
  function busy(form, on) {
    var buttons = form.querySelectorAll("button");
    for (var i = 0; i < buttons.length; i++) buttons[i].disabled = on;
    form.setAttribute("aria-busy", on ? "true" : "false");
  }

  window.labd = {
    api: api,
    ApiError: ApiError,
    loadMe: loadMe,
    showMessage: showMessage,
    errorText: errorText,
    formatTime: formatTime,
    duration: duration,
    bytes: bytes,
    follow: follow,
    el: el,
    wireCopy: wireCopy,
    busy: busy,
    toLogin: toLogin,
  };
})();
