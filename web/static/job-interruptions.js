/* labd job page: a job's capacity and its interruptions (docs/jobs.md "Preemptible
 * capacity") — on-demand or preemptible, what its seconds were charged, and for each
 * preemption when it began, why, what was waiting for its capacity, when the job was
 * back in the queue and when it resumed. Loaded before job.js; adds
 * labd.jobInterruptions.render(job). Text only, never markup. */
(function () {
  "use strict";

  var L = window.labd;
  var $ = function (id) {
    return document.getElementById(id);
  };

  function capacityText(job) {
    if (job.capacity !== "preemptible") return "On-demand: labd never stops it for others.";
    var text = "Preemptible: it runs on capacity nobody else asks for";
    if (job.preempting) return text + ". Being preempted now for " + job.preempting + ".";
    if (job.status_reason === "Preempted") text += ". Preempted: back in the queue, it resumes when capacity frees";
    return text + "; charged " + L.duration(job.charged_s || 0) + " of " + L.duration(job.billable_s || 0) + " billable.";
  }

  function row(x) {
    var timeOf = L.jobs.timeOf;
    return L.el("tr", { dataset: { reason: x.reason } }, [
      L.el("td", null, [timeOf(x.at)]),
      L.el("td", null, [x.reason]),
      L.el("td", null, [x.waiting]),
      L.el("td", null, [x.requeued_at ? timeOf(x.requeued_at) : "stopping…"]),
      L.el("td", null, [x.resumed_at ? timeOf(x.resumed_at) : "—"]),
    ]);
  }

  function render(job) {
    var list = job.interruptions || [];
    var card = $("interruptions-card");
    if (!card) return;
    card.hidden = job.capacity !== "preemptible" && !list.length;
    $("job-capacity").textContent = capacityText(job);
    var tbody = $("job-interruptions").tBodies[0];
    tbody.textContent = "";
    if (!list.length) {
      tbody.appendChild(L.el("tr", null, [L.el("td", { colSpan: 5, className: "empty" }, ["Not interrupted."])]));
      return;
    }
    list.forEach(function (x) {
      tbody.appendChild(row(x));
    });
  }

  L.jobInterruptions = { render: render };
})();
