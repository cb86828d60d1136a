/* labd web UI: helpers shared by the dashboard and the admin page.
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
    el: el,
    wireCopy: wireCopy,
    busy: busy,
    toLogin: toLogin,
  };
})();
