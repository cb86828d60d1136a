/* labd web UI: what the dashboard's training-jobs card and the job page share — reading
 * the submit form's texts (command, name=value lines) and showing a job's status and times.
 * Loaded after common.js; adds labd.jobs. */
(function () {
  "use strict";

  var L = window.labd;

  /* A form text that cannot be read; field is the API field it belongs to, so the
   * message lands next to the same input as the API's own errors. */
  function InputError(field, message) {
    this.name = "InputError";
    this.field = field;
    this.message = message;
  }
  InputError.prototype = Object.create(Error.prototype);

  /* The command as argv: a JSON array of strings, or one line split like a shell
   * would with simple quoting ('…' literal, "…" with \" \\ \$ \` escapes, \x outside
   * quotes). No expansion of any kind: the line is never run by a shell. */
  function splitCommand(text) {
    text = text.trim();
    if (text.charAt(0) === "[") return commandFromJson(text);
    var argv = [];
    var word = null; /* null: between words */
    var quote = "";
    for (var i = 0; i < text.length; i++) {
      var c = text.charAt(i);
      if (quote === "'") {
        if (c === "'") quote = "";
        else word += c;
      } else if (quote === '"') {
        if (c === '"') quote = "";
        else if (c === "\\" && i + 1 < text.length && '"\\$`'.indexOf(text.charAt(i + 1)) >= 0) word += text.charAt(++i);
        else word += c;
      } else if (/\s/.test(c)) {
        if (word !== null) argv.push(word);
        word = null;
      } else {
        if (word === null) word = "";
        if (c === "'" || c === '"') quote = c;
        else if (c === "\\" && i + 1 < text.length) word += text.charAt(++i);
        else word += c;
      }
    }
    if (quote) throw new InputError("command", "The command has an unclosed " + quote + " quote.");
    if (word !== null) argv.push(word);
    if (!argv.length) throw new InputError("command", "Enter the command to run.");
    return argv;
  }

  function commandFromJson(text) {
    var argv;
    try {
      argv = JSON.parse(text);
    } catch (e) {
      throw new InputError("command", "The command starts with [ but is not a JSON array: " + e.message);
    }
    var ok = Array.isArray(argv) && argv.length > 0 && argv.every(function (a) {
      return typeof a === "string";
    });
    if (!ok) throw new InputError("command", "A JSON command is a non-empty array of strings.");
    return argv;
  }

  /* "name=value" lines (blank lines skipped) -> [{name, value}]; the first = splits. */
  function nameValueLines(text, field, what) {
    var out = [];
    text.split("\n").forEach(function (line, n) {
      if (!line.trim()) return;
      var at = line.indexOf("=");
      if (at <= 0) throw new InputError(field, "Line " + (n + 1) + " is not " + what + ".");
      out.push({ name: line.slice(0, at).trim(), value: line.slice(at + 1) });
    });
    return out;
  }

  /* A JSON object text ("" = {}). */
  function jsonObject(text, field) {
    if (!text.trim()) return {};
    var v;
    try {
      v = JSON.parse(text);
    } catch (e) {
      throw new InputError(field, "Not valid JSON: " + e.message);
    }
    if (!v || typeof v !== "object" || Array.isArray(v)) throw new InputError(field, "Give a JSON object, like {\"lr\": 0.01}.");
    return v;
  }

  var LIVE = { InProgress: true, Stopping: true };

  function isLive(job) {
    return !!(job && LIVE[job.status]);
  }

  /* "InProgress" + "Training" -> "In progress · Training"; a finished job shows its status,
   * and its secondary status when it says more (MaxRuntimeExceeded under Failed). */
  function statusText(job) {
    var main = job.status === "InProgress" ? "In progress" : job.status;
    var second = job.secondary_status;
    if (!second || second === job.status) return main;
    /* back in the queue after a preemption: "In progress · Pending (Preempted)" */
    return main + " · " + second + (job.status_reason ? " (" + job.status_reason + ")" : "");
  }

  /* A badge class for the status: running / stopping / failed / stopped (labd.css). */
  function statusClass(status) {
    return (
      "badge state state-" +
      ({ InProgress: "running", Stopping: "stopping", Failed: "failed", Stopped: "stopped", Completed: "completed" }[status] ||
        "queued")
    );
  }

  function pad2(n) {
    return n < 10 ? "0" + n : String(n);
  }

  /* ISO time -> local "YYYY-MM-DD HH:MM:SS" (to the second: phases can be short). */
  function timeOf(value) {
    if (!value) return "—";
    var d = new Date(value);
    if (isNaN(d.getTime())) return String(value);
    return L.formatTime(value) + ":" + pad2(d.getSeconds());
  }

  /* A job's warm pool in a few words, "" when it has none. */
  function warmText(pool) {
    if (!pool) return "";
    var text = pool.status;
    if (pool.status === "Available" && pool.available_until) text += " until " + timeOf(pool.available_until);
    if (pool.reused) text += " (this job reused a warm pool)";
    return text;
  }

  L.jobs = {
    InputError: InputError,
    splitCommand: splitCommand,
    nameValueLines: nameValueLines,
    jsonObject: jsonObject,
    isLive: isLive,
    statusText: statusText,
    statusClass: statusClass,
    timeOf: timeOf,
    warmText: warmText,
  };
})();
