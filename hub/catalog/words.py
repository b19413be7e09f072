"""Chinese (and Japanese, Korean) words in searches.

CJK text has no spaces between words, so a word parser reads a whole run ("中文对话数据集") as one
word and a search for "对话" finds nothing. PostgreSQL's parser does exactly that; SQLite's trigram
index matches substrings of three or more characters, and shorter words by LIKE, so there any
substring is found already.

The catalog's search text therefore also holds every run's characters and character pairs as
words of their own ("中 文 对 话 … 中文 文对 对话 …"), and a search word of CJK characters becomes
its pairs, all of which must be there ("通义千问" → 通义 & 义千 & 千问; one character → that
character): the n-gram indexing of CJK search engines, on the tsvector PostgreSQL already keeps.
"""
from __future__ import annotations

import re

# Han (with extension A and the compatibility block), kana, Hangul syllables.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


def grams(text: str) -> str:
    """The characters and character pairs of every CJK run of `text`, space-separated ('' if none)."""
    out: list[str] = []
    seen: set[str] = set()
    for run in _CJK.findall(text):
        for gram in [*run, *(run[i:i + 2] for i in range(len(run) - 1))]:
            if gram not in seen:
                seen.add(gram)
                out.append(gram)
    return " ".join(out)


def tsquery(terms: list[str]) -> str:
    """A to_tsquery() string for search words (each a \\w+ word): every word must match; a Latin
    word (or the Latin part of a mixed one) as a prefix, so 'imagen' finds ImageNet; a CJK run by
    its character pairs, or its one character."""
    parts: list[str] = []
    for term in terms:
        at = 0
        for m in _CJK.finditer(term):
            if m.start() > at:
                parts.append(f"{term[at:m.start()]}:*")
            run = m.group(0)
            parts.extend([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)])
            at = m.end()
        if at < len(term):
            parts.append(f"{term[at:]}:*")
    return " & ".join(dict.fromkeys(parts))
