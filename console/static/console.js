// Small comforts only: every page reads and every form works without this file.
"use strict";
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
