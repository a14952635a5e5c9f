// asyncq dashboard: live counts, active list and a task's progress bar. The server pushes a
// JSON document over server-sent events when tasks change (at most a few a second); when the
// stream cannot be kept open, the same document is fetched every POLL_MS instead. Besides, a
// header checkbox selects every task of a list page (the selection itself works without the
// script).
"use strict";
(function () {
  var POLL_MS = 5000;
  var lastProcessed = null;

  function apply(doc) {
    if (!doc || doc.error) { status(false); return; }
    var total = 0;
    Object.keys(doc.queues || {}).forEach(function (name) {
      var counts = doc.queues[name];
      total += counts.processed;
      document.querySelectorAll("[data-queue]").forEach(function (scope) {
        if (scope.getAttribute("data-queue") !== name) { return; }
        scope.querySelectorAll("[data-field]").forEach(function (el) {
          var field = el.getAttribute("data-field");
          if (!(field in counts)) { return; }
          if (field === "paused") {
            el.textContent = counts.paused ? "paused" : "running";
            el.className = "badge " + (counts.paused ? "warn" : "ok");
          } else {
            el.textContent = String(counts[field]);
          }
        });
      });
    });
    var rows = document.getElementById("active-rows");
    if (rows && typeof doc.active_html === "string") { rows.innerHTML = doc.active_html; }
    task(doc);
    if (doc.all !== false) { throughput(total); }  // a page of the queues: not the total
    status(true);
  }

  // A task page: its state badge and its progress bar (rendered by the server).
  function task(doc) {
    var badge = document.getElementById("task-state");
    if (badge && typeof doc.task_state === "string") {
      badge.textContent = doc.task_state;
      badge.className = "badge state-" + doc.task_state;
    }
    document.querySelectorAll('[data-field="task-state"]').forEach(function (el) {
      if (typeof doc.task_state === "string") { el.textContent = doc.task_state; }
    });
    var cell = document.getElementById("task-progress");
    if (cell && typeof doc.progress_html === "string") { cell.innerHTML = doc.progress_html; }
  }

  function throughput(total) {
    var el = document.getElementById("throughput");
    var now = Date.now();
    if (el && lastProcessed && total >= lastProcessed.total && now > lastProcessed.at) {
      var rate = (total - lastProcessed.total) * 1000 / (now - lastProcessed.at);
      el.textContent = rate.toFixed(1) + " /s";
    }
    if (!lastProcessed || now - lastProcessed.at > 2000) {
      lastProcessed = { total: total, at: now };
    }
  }

  function status(on) {
    var el = document.getElementById("live-status");
    if (el) { el.className = "live-status" + (on ? " on" : ""); }
  }

  function poll(url) {
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(apply, function () { status(false); })
      .then(function () { setTimeout(function () { poll(url); }, POLL_MS); });
  }

  function start() {
    var body = document.body;
    var events = body.getAttribute("data-events");
    var live = body.getAttribute("data-live");
    if (!live) { return; }
    if (!events || typeof EventSource === "undefined") { poll(live); return; }
    var source = new EventSource(events);
    var failures = 0;
    source.onmessage = function (msg) {
      failures = 0;
      try { apply(JSON.parse(msg.data)); } catch (e) { status(false); }
    };
    source.onerror = function () {
      status(false);
      failures += 1;
      if (source.readyState === EventSource.CLOSED || failures >= 3) {
        source.close();
        poll(live);
      }
    };
  }

  function selectAll() {
    var all = document.getElementById("select-all");
    if (!all) { return; }
    all.addEventListener("change", function () {
      document.querySelectorAll('input[type=checkbox][form="selection"]').forEach(function (box) {
        box.checked = all.checked;
      });
    });
  }

  function ready() { start(); selectAll(); }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
