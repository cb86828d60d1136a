/* labd login page: carries ?next= into the form and shows ?error= messages. */
(function () {
  "use strict";

  var MESSAGES = {
    invalid: "Wrong user name or password.",
    throttled: "Too many failed attempts: wait a little and try again (each failure makes the wait longer).",
    busy: "The server is busy with other logins; try again in a moment.",
  };

  /* Only local paths: "/x", never "//host" or "/\host" (the server checks too). */
  function safeNext(value) {
    if (!value || value.charAt(0) !== "/") return "";
    var second = value.charAt(1);
    if (second === "/" || second === "\\") return "";
    return value;
  }

  function init() {
    var params = new URLSearchParams(window.location.search);
    var next = document.getElementById("next");
    if (next) next.value = safeNext(params.get("next"));

    var code = params.get("error");
    var box = document.getElementById("login-error");
    if (code && box) {
      box.textContent = MESSAGES[code] || "Login failed. Please try again.";
      box.hidden = false;
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
