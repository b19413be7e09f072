// The pages' few behaviours, loaded as a file: the Content-Security-Policy runs no inline script.
(function () {
  // A button that destroys something (Delete, Revoke) asks first: data-confirm holds the question.
  document.querySelectorAll('button[data-confirm]').forEach(function (b) {
    b.addEventListener('click', function (ev) { if (!confirm(b.dataset.confirm)) ev.preventDefault(); });
  });
  // Progressive enhancement: a list filter applies as soon as it changes (the Apply button does it
  // without JavaScript).
  document.querySelectorAll('#filters select').forEach(function (s) {
    s.addEventListener('change', function () { s.form.submit(); });
  });
  // "Back" on error pages: to where the person came from (the link itself leads home).
  document.querySelectorAll('a[data-back]').forEach(function (a) {
    if (window.history.length > 1) {
      a.addEventListener('click', function (ev) { ev.preventDefault(); window.history.back(); });
    }
  });
})();
