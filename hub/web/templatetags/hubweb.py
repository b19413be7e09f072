"""Small template helpers for the web pages."""
from __future__ import annotations

from functools import lru_cache
from html import escape
from urllib.parse import urlencode

from django import template
from django.utils import timezone, translation
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, ngettext, pgettext_lazy

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


# The nouns the pages count, in the page's language: {{ n|plural:"file" }}.
_NOUNS = {
    "file": lambda n: ngettext("%(n)s file", "%(n)s files", n),
    "large file": lambda n: ngettext("%(n)s large file", "%(n)s large files", n),
    "commit": lambda n: ngettext("%(n)s commit", "%(n)s commits", n),
    "comment": lambda n: ngettext("%(n)s comment", "%(n)s comments", n),
    "download": lambda n: ngettext("%(n)s download", "%(n)s downloads", n),
    "pending request": lambda n: ngettext("%(n)s pending request", "%(n)s pending requests", n),
}


@register.filter
def plural(n, word: str) -> str:
    """'1 file', '2 files', '1,024 files' ('— files' when unknown); '3 个文件' in Chinese."""
    return _plural(translation.get_language(), None if n is None else int(n), word)


# Translations are looked up once per language and value: a list page shows thirty cards with four
# translated phrases each, and Django's gettext (active language, catalog, fallbacks) cost a
# millisecond a page. The language is part of every key.
@lru_cache(maxsize=8192)
def _plural(language: str | None, n: int | None, word: str) -> str:
    noun = _NOUNS.get(word)
    if noun is not None:
        return noun(2 if n is None else n) % {"n": count(n)}
    return f"{count(n)} {word}{'' if n == 1 else 's'}"


# Words the pages show from the data (a repo's type, a status), in the page's language: {{ x|word }}.
_WORDS = {
    "dataset": pgettext_lazy("repo type", "dataset"), "model": pgettext_lazy("repo type", "model"),
    "datasets": pgettext_lazy("repo type", "datasets"), "models": pgettext_lazy("repo type", "models"),
    "volume": pgettext_lazy("repo type", "volume"),
    "open": pgettext_lazy("status", "open"), "closed": pgettext_lazy("status", "closed"),
    "merged": pgettext_lazy("status", "merged"), "draft": pgettext_lazy("status", "draft"),
    "pending": pgettext_lazy("status", "pending"), "accepted": pgettext_lazy("status", "accepted"),
    "rejected": pgettext_lazy("status", "rejected"),
    "online": pgettext_lazy("status", "online"), "offline": pgettext_lazy("status", "offline"),
    "revoked": pgettext_lazy("status", "revoked"),
    "added": pgettext_lazy("change", "added"), "modified": pgettext_lazy("change", "modified"),
    "deleted": pgettext_lazy("change", "deleted"),
}


@register.filter
def word(value) -> str:
    return str(_WORDS.get(value, value))


@register.filter
def localized(entry, field: str) -> str:
    """A catalog entry's (or card's) title or summary in the page's language: its Chinese one
    (`title_zh`) for a page in Chinese where it has one, else the English one."""
    if entry is None:
        return ""
    if translation.get_language() == "zh-hans":
        text = getattr(entry, f"{field}_zh", None)
        if text:
            return text
    return getattr(entry, field, None) or ""


# "… ago" and "in …" per unit, as _NOUNS (literal strings, for makemessages).
_AGO = {
    "year": lambda n: ngettext("%(n)s year ago", "%(n)s years ago", n),
    "month": lambda n: ngettext("%(n)s month ago", "%(n)s months ago", n),
    "week": lambda n: ngettext("%(n)s week ago", "%(n)s weeks ago", n),
    "day": lambda n: ngettext("%(n)s day ago", "%(n)s days ago", n),
    "hour": lambda n: ngettext("%(n)s hour ago", "%(n)s hours ago", n),
    "minute": lambda n: ngettext("%(n)s minute ago", "%(n)s minutes ago", n),
}
_IN = {
    "day": lambda n: ngettext("in %(n)s day", "in %(n)s days", n),
    "hour": lambda n: ngettext("in %(n)s hour", "in %(n)s hours", n),
    "minute": lambda n: ngettext("in %(n)s minute", "in %(n)s minutes", n),
}


@lru_cache(maxsize=4096)
def _ago(language: str | None, unit: str, n: int) -> str:
    return (_AGO[unit](n) % {"n": n}).replace(" ", "\xa0", 1)  # (the number stays with its unit)


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
            return _ago(translation.get_language(), unit, int(seconds // length))
    return gettext("just now")


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
            return (_IN[unit](n) % {"n": n}).replace(" ", "\xa0")
    return gettext("in under a minute")


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
    key = (translation.get_language(), empty, tuple(choices))  # (labels may be translated: one set per language)
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


def _badges() -> dict[str, str]:
    """The cards' badges, in the page's language: private, ready, not mirrored (a catalog entry) and
    no files yet (a repo of its own)."""
    return _badges_in(translation.get_language())


@lru_cache(maxsize=16)
def _badges_in(language: str | None) -> dict[str, str]:
    # (the words outside the f-strings: xgettext does not look into them)
    private, ready, pending, empty = gettext("private"), gettext("ready"), gettext("not mirrored"), gettext("no files yet")
    metadata_only = gettext("Only the metadata is on this hub")
    return {"private": f'<span class="badge private">{escape(private)}</span> ',
            "ready": f'<span class="badge ready">{escape(ready)}</span>',
            "pending": f'<span class="badge pending" title="{escape(metadata_only)}">{escape(pending)}</span>',
            "empty": f'<span class="badge empty">{escape(empty)}</span>'}


@register.simple_tag
def repo_card(r, badge: dict[str, str] | None = None) -> SafeString:
    """One result card of a list (a services.CardRow). Built in Python with the standard library's
    escape: thirty included templates were a third of a list page's time, format_html half of what
    was left. "updated … ago" is computed at each render. Title and summary in the page's language."""
    badge = badge or _badges()
    lang = translation.get_language()
    badges = (badge["private"] if r.private else "") + (
        badge["ready"] if r.mirrored else badge["pending"] if r.entry is not None else badge["empty"])
    parts = [f'<div class="card">\n  <div class="title">\n    <a href="{escape(r.url)}">{escape(r.repo_id)}</a>\n'
             f'    {badges}\n  </div>']
    meta: list[str] = []
    if r.entry is not None:
        title, summary = localized(r, "title"), localized(r, "summary")
        if title != r.name:
            parts.append(f'  <div class="sub">{escape(title)}</div>')
        if summary:
            parts.append(f'  <p class="summary">{escape(summary)}</p>')
        meta += [f'<span class="chip task">{escape(t)}</span>' for t in (r.tasks or [])[:2]]
        meta += [f'<span class="chip">{escape(m)}</span>' for m in (r.modality or [])[:2]]
        if r.license:
            meta.append(f'<span class="chip lic">{escape(r.license)}</span>')
        if r.parameters:
            meta.append(f'<span>{escape(_params(lang, r.parameters))}</span><span class="sep">·</span>')
    if r.size is not None:
        meta.append(f'<span>{size(r.size)}</span><span class="sep">·</span>')
    meta.append(f'<span>{escape(_updated(lang, ago(r.last_modified)))}</span><span class="sep">·</span>'
                f'<span>{plural(r.downloads, "download")}</span>')
    parts.append('  <div class="meta">' + "\n    ".join(meta) + "</div>\n</div>")
    return mark_safe("\n".join(parts))


@lru_cache(maxsize=1024)
def _params(language: str | None, parameters: str) -> str:
    return gettext("%(n)s params") % {"n": parameters}


@lru_cache(maxsize=4096)
def _updated(language: str | None, when: str) -> str:
    return gettext("updated %(ago)s") % {"ago": when}


@register.simple_tag
def repo_cards(rows) -> SafeString:
    """The cards of a list page, in one tag: a template loop pushed a context per card."""
    badge = _badges()
    return mark_safe("".join(repo_card(r, badge) for r in rows))


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
