/* job-shell.js - the Shell card of a job page: a terminal (xterm.js) in the job's
 * own sandbox over the WebSocket /api/v1/jobs/{id}/shell (docs/jobs.md, "A shell
 * into a running job"). Keystrokes go as binary frames, a resize as a text frame
 * {"type":"resize","cols":C,"rows":R}; what the shell writes comes back as binary
 * frames. The button shows while the job trains: the card asks for the job again
 * whenever job.js changes its status badge. */
(function () {
  "use strict";

  var COLS = 100, ROWS = 30;
  var jobId = window.location.pathname.split("/").filter(Boolean).pop();
  var ws = null, term = null, closedText = "";

  function $(id) { return document.getElementById(id); }

  function say(text) { $("job-shell-state").textContent = text; }

  function training(job) {
    return job && job.status === "InProgress" && job.secondary_status === "Training";
  }

  function refresh() {
    fetch("/api/v1/jobs/" + encodeURIComponent(jobId), {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (job) {
        var on = training(job);
        $("job-shell-open").hidden = !on || !!ws;
        if (!ws) say(closedText || (on ? "" : "A shell opens while the job trains."));
      })
      .catch(function () {});
  }

  function closeShell() {
    if (ws) ws.close(1000);
  }

  function open() {
    var proto = window.location.protocol === "https:" ? "wss:" : "ws:";
    var url = proto + "//" + window.location.host + "/api/v1/jobs/" +
      encodeURIComponent(jobId) + "/shell?cols=" + COLS + "&rows=" + ROWS;
    var enc = new TextEncoder();

    if (!term) {
      term = new window.Terminal({cols: COLS, rows: ROWS, cursorBlink: true, scrollback: 2000,
                                  fontFamily: "ui-monospace, 'DejaVu Sans Mono', monospace"});
      term.open($("job-shell-term"));
      term.onData(function (d) {
        if (ws && ws.readyState === WebSocket.OPEN) ws.send(enc.encode(d));
      });
      term.onResize(function (size) {
        if (ws && ws.readyState === WebSocket.OPEN)
          ws.send(JSON.stringify({type: "resize", cols: size.cols, rows: size.rows}));
      });
    }
    $("job-shell-term").hidden = false;
    $("job-shell-open").hidden = true;
    closedText = "";
    say("Connecting…");
    ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    ws.onopen = function () {
      say("Connected: a shell in the job's sandbox, as you.");
      $("job-shell-close").hidden = false;
      term.focus();
    };
    ws.onmessage = function (ev) {
      if (ev.data instanceof ArrayBuffer) term.write(new Uint8Array(ev.data));
    };
    ws.onclose = function (ev) {
      ws = null;
      $("job-shell-close").hidden = true;
      closedText = "The shell is closed" + (ev.reason ? ": " + ev.reason : "") + ".";
      say(closedText);
      refresh();
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!$("job-shell-open")) return;
    $("job-shell-open").addEventListener("click", open);
    $("job-shell-close").addEventListener("click", closeShell);
    var badge = $("job-status");
    if (badge) new MutationObserver(refresh).observe(badge, {childList: true, characterData: true,
                                                             subtree: true});
    refresh();
  });
})();
