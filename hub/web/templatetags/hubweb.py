"""Small template helpers for the web pages."""
from __future__ import annotations

from urllib.parse import urlencode

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

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
