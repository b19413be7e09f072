"""Small template helpers for the web pages."""
from __future__ import annotations

from urllib.parse import urlencode

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince

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


@register.simple_tag
def options(choices, selected: str, empty: str = ""):
    """<option>s of a filter: (value, label[, count]) tuples, `selected` marked, after a blank
    option labelled `empty` (none if it is ''). Built in Python
    because a list page has a hundred of them and the template loop was most of its render time."""
    rows = [(value, label, f" ({rest[0]})" if rest else "", " selected" if value == selected else "")
            for value, label, *rest in choices]
    blank = format_html('<option value="">{}</option>', empty) if empty else mark_safe("")
    return blank + format_html_join(
        "", '<option value="{}"{}>{}{}</option>', ((v, mark_safe(sel), label, n) for v, label, n, sel in rows))


@register.simple_tag
def repo_card(r) -> str:
    """One result card of a list (a services.CardRow). Built in Python: thirty included templates
    were a third of a list page's time. "updated … ago" is computed at each render."""
    badges = [format_html('<span class="badge private">private</span>')] if r.private else []
    badges.append(format_html('<span class="badge ready">ready</span>') if r.mirrored else
                  format_html('<span class="badge pending" title="Only the metadata is on this hub">not mirrored</span>'))
    parts = [format_html('<div class="card">\n  <div class="title">\n    <a href="{}">{}</a>\n    {}\n  </div>',
                         r.url, r.repo_id, mark_safe(" ".join(badges)))]
    meta: list[str] = []
    if r.entry is not None:
        if r.title != r.name:
            parts.append(format_html('  <div class="sub">{}</div>', r.title))
        if r.summary:
            parts.append(format_html('  <p class="summary">{}</p>', r.summary))
        meta += [format_html('<span class="chip task">{}</span>', t) for t in (r.tasks or [])[:2]]
        meta += [format_html('<span class="chip">{}</span>', m) for m in (r.modality or [])[:2]]
        if r.license:
            meta.append(format_html('<span class="chip lic">{}</span>', r.license))
        if r.parameters:
            meta.append(format_html('<span>{} params</span><span class="sep">·</span>', r.parameters))
    if r.size is not None:
        meta.append(format_html('<span>{}</span><span class="sep">·</span>', size(r.size)))
    meta.append(format_html('<span>updated {} ago</span><span class="sep">·</span><span>{} downloads</span>',
                            timesince(r.last_modified), count(r.downloads)))
    parts.append(format_html('  <div class="meta">{}</div>\n</div>', mark_safe("\n    ".join(meta))))
    return mark_safe("\n".join(parts))
