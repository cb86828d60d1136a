/* labd login page: carries ?next= into the form and the single sign-on link,
 * shows ?error= messages (a refused single sign-on names its reason), and
 * shows "Sign in with <name>" when GET /api/v1/sso says it is on. */
(function () {
  "use strict";

  var MESSAGES = {
    invalid: "Wrong user name or password.",
    throttled: "Too many failed attempts: wait a little and try again (each failure makes the wait longer).",
    busy: "The server is busy with other logins; try again in a moment.",
  };

  /* Why a single sign-on was refused (?error=sso&reason=...): the codes of
   * server/auth/oidc*.c. The audit log has the details. */
  var SSO_REASONS = {
    state_mismatch: "this sign-in was not started here, or was already used. Start it again.",
    provider_error: "the identity provider did not sign you in.",
    malformed_callback: "the identity provider's answer was incomplete.",
    code_refused: "the identity provider refused the sign-in (a code is good once). Start it again.",
    unavailable: "the identity provider cannot be reached right now. Try again later.",
    busy: "too many sign-ins at once. Try again in a moment.",
    malformed_token: "the identity provider sent a malformed ID token.",
    bad_algorithm: "the ID token is signed with an algorithm labd does not accept.",
    unknown_key: "the ID token is signed with a key the identity provider does not publish.",
    bad_signature: "the ID token's signature does not verify.",
    wrong_issuer: "the ID token comes from another issuer.",
    wrong_audience: "the ID token was issued for another application.",
    expired: "the ID token has expired (check the server's clock).",
    bad_issue_time: "the ID token's issue time is in the future (check the server's clock).",
    nonce_mismatch: "the ID token does not belong to this sign-in.",
    no_subject: "the ID token names no user.",
    bad_name: "your user name from the identity provider is not a valid labd user name.",
    domain_not_allowed: "your e-mail domain may not sign in here.",
    group_not_allowed: "you are in none of the groups that may sign in here.",
    not_provisioned: "you have no labd account yet: ask your lab's administrator.",
    local_account: "this account has a password: sign in with the form below.",
    disabled: "your account is disabled.",
  };

  function showError(box, text) {
    box.textContent = text;
    box.hidden = false;
  }

  /* Shows the single sign-on button when the server has it on. */
  function offerSso(next) {
    fetch("/api/v1/sso", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (sso) {
        if (!sso || !sso.enabled) return;
        var link = document.getElementById("sso-link");
        document.getElementById("sso-name").textContent = sso.name;
        link.href = sso.url + (next ? "?next=" + encodeURIComponent(next) : "");
        document.getElementById("sso").hidden = false;
      })
      .catch(function () {});
  }

  /* Only local paths: "/x", never "//host" or "/\host" (the server checks too). */
  function safeNext(value) {
    if (!value || value.charAt(0) !== "/") return "";
    var second = value.charAt(1);
    if (second === "/" || second === "\\") return "";
    return value;
  }

  function init() {
    var params = new URLSearchParams(window.location.search);
    /* labd's session ended; the identity provider's ends next (the server's
     * form answer may not send the browser to another origin itself) */
    if (params.get("logout") === "sso") {
      window.location.replace("/oidc/logout");
      return;
    }
    var next = document.getElementById("next");
    if (next) next.value = safeNext(params.get("next"));

    var code = params.get("error");
    var box = document.getElementById("login-error");
    if (code === "sso" && box) {
      showError(box, "Single sign-on failed: " +
        (SSO_REASONS[params.get("reason")] || "please try again."));
    } else if (code && box) {
      showError(box, MESSAGES[code] || "Login failed. Please try again.");
    }
    offerSso(next ? next.value : "");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
