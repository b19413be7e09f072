"""Which configs and splits a dataset's files make, as the `datasets` library infers them: the
`configs:` of the README's front matter when it has them, otherwise one "default" config whose
splits come from file and directory names (train/test/validation and their synonyms, upstream's
keywords), all files in "train" when no name says a split."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

FORMATS = {".parquet": "parquet", ".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl",
           ".ndjson": "jsonl"}
# Upstream's keywords (datasets.data_files): a split named by a file or directory name.
KEYWORDS = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}
ORDER = ["train", "validation", "test"]
# The builder a mix of formats gets: the one with most files (ties in this order), as upstream.
PREFERENCE = ["parquet", "jsonl", "json", "csv", "tsv"]
_SEP = re.compile(r"[ ._-]")


def format_of(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1].lower()
    for ext, fmt in FORMATS.items():
        if name.endswith(ext):
            return fmt
    return None


def _family(fmt: str) -> str:
    return {"jsonl": "json", "tsv": "csv"}.get(fmt, fmt)


@dataclass
class Split:
    config: str
    split: str
    paths: list[str] = field(default_factory=list)


def split_of(path: str) -> str | None:
    """The split a path's names say, if any: a directory named for it, else a word of the file name."""
    parts = path.lower().split("/")
    for part in parts[:-1]:
        for split, words in KEYWORDS.items():
            if part in words:
                return split
    stem = parts[-1].rsplit(".", 1)[0]
    tokens = [t for t in _SEP.split(stem) if t]
    for split, words in KEYWORDS.items():
        if any(t in words for t in tokens):
            return split
    return None


def _ordered(splits: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    known = [s for s in ORDER if s in splits]
    return [(s, splits[s]) for s in known + sorted(set(splits) - set(known))]


def infer(paths: list[str], card: dict) -> list[Split]:
    """The splits of a dataset whose files are `paths` (repo paths, any order) and whose README
    front matter is `card`."""
    data = sorted(p for p in paths if format_of(p) and not p.rsplit("/", 1)[-1].startswith("."))
    configs = card.get("configs") if isinstance(card, dict) else None
    if isinstance(configs, list) and configs:
        return _from_configs(data, configs)
    if not data:
        return []
    by_family: dict[str, list[str]] = {}
    for p in data:
        by_family.setdefault(_family(format_of(p)), []).append(p)
    family = max(by_family, key=lambda f: (len(by_family[f]), -PREFERENCE.index(f)))
    files = by_family[family]
    named: dict[str, list[str]] = {}
    for p in files:
        s = split_of(p)
        if s is not None:
            named.setdefault(s, []).append(p)
    if not named:
        named = {"train": files}
    return [Split("default", s, ps) for s, ps in _ordered(named)]


def glob_regex(pattern: str) -> re.Pattern:
    """A data_files pattern (fsspec glob: ** spans directories, * and ? do not) as a regex."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append({"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c)))
        i += 1
    return re.compile("".join(out) + r"\Z")


def _patterns(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _from_configs(data: list[str], configs: list) -> list[Split]:
    out: list[Split] = []
    for conf in configs:
        if not isinstance(conf, dict):
            continue
        name = str(conf.get("config_name") or "default")
        base = str(conf.get("data_dir") or "").strip("/")
        files = conf.get("data_files")
        by_split: dict[str, list[str]] = {}
        if isinstance(files, dict):
            files = [{"split": k, "path": v} for k, v in files.items()]
        if isinstance(files, list) and files and all(isinstance(f, dict) for f in files):
            specs = [(str(f.get("split") or "train"), _patterns(f.get("path"))) for f in files]
        elif files is not None:
            specs = [("train", _patterns(files))]
        else:
            specs = None
        if specs is None:  # a data_dir alone: its files, split by their names
            inner = [p[len(base) + 1:] for p in data if not base or p.startswith(base + "/")]
            for s in infer(inner, {}):
                out.append(Split(name, s.split, [f"{base}/{p}" if base else p for p in s.paths]))
            continue
        for split, patterns in specs:
            regexes = [glob_regex(f"{base}/{pat}" if base else pat) for pat in patterns]
            by_split.setdefault(split, [])
            by_split[split] += [p for p in data if any(r.match(p) for r in regexes) and p not in by_split[split]]
        for split, paths in by_split.items():
            out.append(Split(name, split, paths))
    return out
