"""Small template helpers for the web pages."""
from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from django import template
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from hub.catalog.services import language_name
from hub.config import format_size

register = template.Library()


@register.filter
def size(n) -> str:
    """Bytes in decimal units (as quotas are reported); '—' when unknown."""
    return "—" if n is None else format_size(int(n))


@register.filter
def count(n) -> str:
    return "—" if n is None else f"{int(n):,}"


@register.filter
def plural(n, word: str) -> str:
    """'1 file', '2 files', '1,024 files' ('— files' when unknown)."""
    return f"{count(n)} {word}{'' if n == 1 else 's'}"


_AGO_UNITS = (("year", 365.25 * 86400), ("month", 30.44 * 86400), ("week", 7 * 86400), ("day", 86400),
              ("hour", 3600), ("minute", 60))


@register.filter
def ago(when) -> str:
    """'5 minutes ago', '3 weeks ago': the largest whole unit, as catalog sites say it; under a
    minute (or a clock a little ahead) 'just now'. A list page shows thirty of these: Django's
    timesince (calendar arithmetic, two units, translations) was a tenth of its time."""
    seconds = (timezone.now() - when).total_seconds()
    for unit, length in _AGO_UNITS:
        if seconds >= length:
            n = int(seconds // length)
            return f"{n}\xa0{unit}{'' if n == 1 else 's'} ago"
    return "just now"


_UNTIL_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60))


@register.filter
def until(when) -> str:
    """'in 30 days', 'in 5 hours', 'in 1 minute': the time left before `when` in days, hours or
    minutes (the largest that fits: an expiry is picked in days), rounded to the nearest, so a token
    made for 30 days says 30 the moment it is made; under a minute 'in under a minute'."""
    seconds = (when - timezone.now()).total_seconds()
    for unit, length in _UNTIL_UNITS:
        if seconds >= length:
            n = int(seconds / length + 0.5)
            return f"in\xa0{n}\xa0{unit}{'' if n == 1 else 's'}"
    return "in under a minute"


@register.filter
def language(code: str) -> str:
    return language_name(code)


@register.filter
def percent(part, whole) -> float:
    """part / whole in percent, clamped to 0–100 (for bars)."""
    if not whole:
        return 0.0
    return round(max(0.0, min(100.0, 100.0 * float(part or 0) / float(whole))), 1)


@register.simple_tag
def query(params, **changes) -> str:
    """The current query string with `changes` applied (a None or '' value removes the key); a
    change of anything but the page goes back to page 1."""
    data = {k: v for k, v in params.items() if v}
    if any(k != "p" for k in changes):
        data.pop("p", None)
    for k, v in changes.items():
        if v in (None, ""):
            data.pop(k, None)
        else:
            data[k] = v
    return "?" + urlencode(data) if data else "?"


_OPTIONS: dict[tuple, str] = {}  # rendered <option>s by (blank label, choices), no value selected


@register.simple_tag
def options(choices, selected: str, empty: str = "") -> SafeString:
    """<option>s of a filter: (value, label[, count]) tuples, `selected` marked, after a blank
    option labelled `empty` (none if it is ''). A list page has a hundred of them and the same
    choices come back on every request (the facets change when the catalog does), so each set is
    rendered once; selecting one is a replace in the rendered string."""
    key = (empty, tuple(choices))
    html = _OPTIONS.get(key)
    if html is None:
        rows = [f'<option value="{escape(str(value))}">{escape(str(label))}{f" ({rest[0]})" if rest else ""}</option>'
                for value, label, *rest in choices]
        html = (f'<option value="">{escape(empty)}</option>' if empty else "") + "".join(rows)
        if len(_OPTIONS) > 256:
            _OPTIONS.clear()
        _OPTIONS[key] = html
    if selected:
        mark = f'<option value="{escape(str(selected))}">'
        html = html.replace(mark, mark[:-1] + " selected>", 1)
    return mark_safe(html)


_BADGE_PRIVATE = '<span class="badge private">private</span> '
_BADGE_READY = '<span class="badge ready">ready</span>'
_BADGE_PENDING = '<span class="badge pending" title="Only the metadata is on this hub">not mirrored</span>'
_BADGE_EMPTY = '<span class="badge empty">no files yet</span>'  # a repo of its own, not a catalog entry


@register.simple_tag
def repo_card(r) -> SafeString:
    """One result card of a list (a services.CardRow). Built in Python with the standard library's
    escape: thirty included templates were a third of a list page's time, format_html half of what
    was left. "updated … ago" is computed at each render."""
    badges = (_BADGE_PRIVATE if r.private else "") + (
        _BADGE_READY if r.mirrored else _BADGE_PENDING if r.entry is not None else _BADGE_EMPTY)
    parts = [f'<div class="card">\n  <div class="title">\n    <a href="{escape(r.url)}">{escape(r.repo_id)}</a>\n'
             f'    {badges}\n  </div>']
    meta: list[str] = []
    if r.entry is not None:
        if r.title != r.name:
            parts.append(f'  <div class="sub">{escape(r.title or "")}</div>')
        if r.summary:
            parts.append(f'  <p class="summary">{escape(r.summary)}</p>')
        meta += [f'<span class="chip task">{escape(t)}</span>' for t in (r.tasks or [])[:2]]
        meta += [f'<span class="chip">{escape(m)}</span>' for m in (r.modality or [])[:2]]
        if r.license:
            meta.append(f'<span class="chip lic">{escape(r.license)}</span>')
        if r.parameters:
            meta.append(f'<span>{escape(r.parameters)} params</span><span class="sep">·</span>')
    if r.size is not None:
        meta.append(f'<span>{size(r.size)}</span><span class="sep">·</span>')
    meta.append(f'<span>updated {ago(r.last_modified)}</span><span class="sep">·</span>'
                f'<span>{plural(r.downloads, "download")}</span>')
    parts.append('  <div class="meta">' + "\n    ".join(meta) + "</div>\n</div>")
    return mark_safe("\n".join(parts))


@register.simple_tag
def repo_cards(rows) -> SafeString:
    """The cards of a list page, in one tag: a template loop pushed a context per card."""
    return mark_safe("".join(repo_card(r) for r in rows))


@register.simple_tag(takes_context=True)
def refill(context, *action: object, **hidden: object) -> dict[str, str]:
    """What was typed into this form when it last failed (hub.web.pages.keep_form), or {} for every
    other form, so that only the failed one comes back filled in. The form is the one posting to the
    action its arguments make up, and where forms share an action (each row's rename), whose hidden
    fields have the values given: {% refill "/settings/volume/rename" src=p as typed %}."""
    kept = context.get("form_kept")
    if not kept or kept["action"] != "".join(str(part) for part in action):
        return {}
    values = kept["values"]
    return values if all(values.get(name) == str(value) for name, value in hidden.items()) else {}
