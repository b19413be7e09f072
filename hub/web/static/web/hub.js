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
  // A copy button on every snippet (commands, code, the Python to use a repo). The labels come
  // translated on <body>. The clipboard API needs a secure context (https or localhost); on a hub
  // reached over plain http the button selects the text and copies it the old way.
  var body = document.body.dataset;
  document.querySelectorAll('.snippet pre, .notice pre, pre.mount-command, .markdown pre').forEach(function (pre) {
    var wrap = document.createElement('div');
    wrap.className = 'copywrap';
    pre.parentNode.insertBefore(wrap, pre);
    wrap.appendChild(pre);
    var b = document.createElement('button');
    b.type = 'button';
    b.className = 'copy';
    b.textContent = body.copy || 'Copy';
    wrap.appendChild(b);
    function said(text) {
      b.textContent = text;
      setTimeout(function () { b.textContent = body.copy || 'Copy'; }, 1500);
    }
    function oldWay() {
      var range = document.createRange();
      range.selectNodeContents(pre);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      var ok = false;
      try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
      said(ok ? (body.copied || 'Copied') : (body.copyFailed || 'Select and copy'));
    }
    b.addEventListener('click', function () {
      var text = pre.innerText.replace(/\n$/, '');
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { said(body.copied || 'Copied'); }, oldWay);
      } else {
        oldWay();
      }
    });
  });
  // "Back" on error pages: to where the person came from (the link itself leads home).
  document.querySelectorAll('a[data-back]').forEach(function (a) {
    if (window.history.length > 1) {
      a.addEventListener('click', function (ev) { ev.preventDefault(); window.history.back(); });
    }
  });
})();
