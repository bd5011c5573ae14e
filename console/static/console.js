// Small comforts only: every page reads and every form works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", function () { live(); });
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("form.js-confirm").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      if (!window.confirm(form.dataset.confirm)) { e.preventDefault(); }
    });
  });
  document.querySelectorAll("button.js-copy").forEach(function (button) {
    var field = document.getElementById(button.dataset.copy);
    if (!field || !navigator.clipboard) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(field.value).then(function () { button.textContent = "Copied"; });
    });
  });
});

// live keeps the page's live regions current: every few seconds it asks for them with the ETag of
// what it shows, and replaces them only when the answer is not 304. A hidden tab does not ask.
function live() {
  var status = document.getElementById("live-status");
  if (!status || !window.fetch || !window.DOMParser) { return; }
  var every = Number(status.dataset.live) || 3000;
  var etag = null, busy = false, timer = null;
  function stop(text) {
    status.classList.remove("loading");
    status.textContent = text;
    if (timer) { clearInterval(timer); }
  }
  function tick() {
    if (busy || document.hidden) { return; }
    busy = true;
    status.classList.add("loading");
    status.textContent = "Updating…";
    var headers = { "X-Console-Live": "1" };
    if (etag) { headers["If-None-Match"] = etag; }
    fetch(status.dataset.liveUrl || window.location.href, { headers: headers, credentials: "same-origin", cache: "no-store", redirect: "manual" })
      .then(function (r) {
        if (r.status === 304) { return null; }
        if (r.status !== 200 || r.headers.get("X-Console-Live") !== "1") { throw new Error("not live"); }
        etag = r.headers.get("ETag");
        return r.text();
      })
      .then(function (html) {
        if (html !== null) { swap(html); }
        busy = false;
        status.classList.remove("loading");
        status.textContent = "Up to date at " + new Date().toLocaleTimeString();
      })
      .catch(function () {
        busy = false;
        stop("Updates stopped: reload the page.");
      });
  }
  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    doc.querySelectorAll("[data-live-region]").forEach(function (fresh) {
      var old = document.getElementById(fresh.id);
      if (!old || old.isEqualNode(fresh)) { return; }
      old.replaceWith(document.importNode(fresh, true));
      // Forms outside the regions act on the version the regions now show.
      if (fresh.dataset.version) {
        document.querySelectorAll("form input[name=version]").forEach(function (input) { input.value = fresh.dataset.version; });
      }
    });
  }
  timer = setInterval(tick, every);
}
