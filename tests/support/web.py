"""Pages in a real headless Chromium: where screenshots go, a phone's viewport, and a script that
records every Content Security Policy violation of a page in `window.__csp`."""
from __future__ import annotations

from pathlib import Path

SHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"

PHONE = {"width": 390, "height": 844}

CSP_WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' ' + (e.sourceFile || '') + ':' + e.lineNumber);
});
"""
