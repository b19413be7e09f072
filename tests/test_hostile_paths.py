"""Hostile paths, every entry point at once: commits (HF protocol: inline and LFS files, deletes of
files and folders), the manifest, volume writes, upload sessions, mkdir and moves, and instance
mount paths refuse traversal, absolute paths, NUL and control characters, backslashes, overlong
names, non-NFC and invisible or direction-changing unicode, .git as any component in any case, and
names that read as '..' or hold a '/' once NFKC-normalized — with 400 and a sentence, and nothing
stored. (Reads of such paths are simply not found.)"""
from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest
import requests

from tests.support.hf import auth

HOSTILE = {
    "parent": "../escape.txt",
    "deep-parent": "a/../../escape.txt",
    "absolute": "/etc/passwd",
    "nul": "a\x00b.txt",
    "control": "a\x1bb.txt",
    "backslash": "a\\..\\b.txt",
    "dot": "a/./b.txt",
    "empty-component": "a//b.txt",
    "long-name": "x" * 300 + ".txt",
    "long-path": "/".join(["d" * 200] * 30),
    "non-nfc": "cafe\u0301.txt",
    "rtl-override": "invoice\u202efdp.exe",
    "zero-width": "rea\u200bdme.md",
    "git": ".git/config",
    # .git as any component, in any case, and as Windows and macOS file systems spell it
    "git-upper": ".GIT/config",
    "git-nested": "a/.git/config",
    "git-mixed-case-last": "a/.Git",
    "git-trailing-dot": "sub/.git./hooks/post-checkout",
    "git-ntfs-short-name": "GIT~1/config",
    # names that read as '..' or hold a '/' once NFKC-normalized
    "nfkc-two-dot-leader": "\u2025/x.txt",
    "nfkc-fullwidth-dots": "\uff0e\uff0e/x.txt",
    "nfkc-fullwidth-slash": "a\uff0f..\uff0fb.txt",
}
SHA = "ab" * 32


@pytest.fixture
def repo(hub, alice, unique) -> str:  # noqa: F811
    repo_id = f"alice/paths-{unique}"
    hub.api(alice).create_repo(repo_id)
    return repo_id


def commit(hub, token, repo_id, path, kind="file"):
    op = {"file": {"key": "file", "value": {"path": path, "encoding": "base64",
                                            "content": base64.b64encode(b"x").decode()}},
          "lfs": {"key": "lfsFile", "value": {"path": path, "algo": "sha256", "oid": SHA, "size": 5}},
          "delete": {"key": "deletedFile", "value": {"path": path}},
          "delete folder": {"key": "deletedFolder", "value": {"path": path}}}[kind]
    lines = [{"key": "header", "value": {"summary": "hostile"}}, op]
    return requests.post(f"{hub.url}/api/models/{repo_id}/commit/main", data="\n".join(json.dumps(x) for x in lines),
                         headers=auth(token) | {"Content-Type": "application/x-ndjson"}, timeout=30)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_paths_are_refused_everywhere_they_enter(hub, alice, repo, name):  # noqa: F811
    path = HOSTILE[name]
    calls = {
        "commit": commit(hub, alice, repo, path),
        "lfs commit": commit(hub, alice, repo, path, "lfs"),
        "delete": commit(hub, alice, repo, path, "delete"),
        "folder delete": commit(hub, alice, repo, path, "delete folder"),
        "volume upload session": requests.post(f"{hub.url}/api/volume/uploads", json={"path": path, "size": 10},
                                               headers=auth(alice), timeout=30),
        "manifest": requests.get(f"{hub.url}/api/v1/repos/model/{repo}/manifest", params={"path": path},
                                 headers=auth(alice), timeout=30),
        "volume write": requests.put(f"{hub.url}/api/volume/files/{quote(path, safe='/')}", data=b"x",
                                     headers=auth(alice), timeout=30),
        "volume mkdir": requests.post(f"{hub.url}/api/volume/mkdir", json={"path": path}, headers=auth(alice),
                                      timeout=30),
        "volume move": requests.post(f"{hub.url}/api/volume/move", json={"src": "nothing-here", "dst": path},
                                     headers=auth(alice), timeout=30),
        "mount path": requests.post(f"{hub.url}/api/instances", headers=auth(alice), timeout=30,
                                    json={"name": f"p{abs(hash(name)) % 10**6}", "mounts": [{"repo": repo, "path": path}]}),
    }
    for where, r in calls.items():
        if where in ("manifest", "volume write") or (where == "mount path" and name == "absolute"):
            # Carried in the URL: HTTP clients normalise '..' and '.' segments away before sending,
            # the server refuses request lines that long (414), and a leading '/' means the root.
            assert r.status_code in (400, 404, 414) or (r.status_code in (200, 201) and name in ("dot", "absolute")), \
                (where, r.status_code, r.text[:200])
            continue
        # (the Hugging Face protocol's commit answers 422, as upstream does; the other doors 400)
        assert r.status_code == (422 if "commit" in where or "delete" in where else 400), \
            (where, r.status_code, r.text[:300])
        body = r.json()
        assert body["code"] in ("InvalidPath", "BadRequest"), (where, body)
        assert body["error"]
    # nothing was stored: the repo has only its .gitattributes, and no volume entry has a hostile name
    files = [f.rfilename for f in hub.api(alice).list_repo_tree(repo, recursive=True)]
    assert files == [".gitattributes"], files
    names = [i["name"] for i in requests.get(f"{hub.url}/api/volume/ls", params={"limit": 1000}, headers=auth(alice),
                                              timeout=30).json()["items"]]
    assert not [n for n in names if any(c in n for c in ("\x00", "\x1b", "\\", "\u202e", "\u200b"))], names
