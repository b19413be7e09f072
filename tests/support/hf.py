"""The Hugging Face protocol spoken by hand (raw HTTP): auth headers, LFS batch requests and the
uploads they hand out, git blob ids."""
from __future__ import annotations

import hashlib
import json

import requests

LFS_JSON = "application/vnd.git-lfs+json"


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def url_prefix(repo_type: str) -> str:
    return "datasets/" if repo_type == "dataset" else ""


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def lfs_batch(
    hub,
    token: str,
    repo_id: str,
    objects: list[tuple[str, int]],
    *,
    operation: str = "upload",
    repo_type: str = "model",
    transfers: tuple[str, ...] = ("basic", "multipart"),
) -> dict:
    """The raw LFS batch answer for (oid, size) objects, as a client would ask for it."""
    resp = requests.post(
        f"{hub.url}/{url_prefix(repo_type)}{repo_id}.git/info/lfs/objects/batch",
        headers=auth(token) | {"Accept": LFS_JSON, "Content-Type": LFS_JSON},
        data=json.dumps(
            {
                "operation": operation,
                "transfers": list(transfers),
                "hash_algo": "sha256",
                "objects": [{"oid": oid, "size": size} for oid, size in objects],
            }
        ),
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def push_lfs(upload: dict, oid: str, data: bytes) -> list[requests.Response]:
    """Sends `data` where an LFS batch `upload` action says, as the client does (no auth): one PUT,
    or the numbered part PUTs and then the completion POST."""
    header = upload.get("header", {})
    if "chunk_size" not in header:  # (with the headers the action names, as git-lfs sends them)
        return [requests.put(upload["href"], data=data, headers=header, timeout=120)]
    chunk = int(header["chunk_size"])
    urls = [header[k] for k in sorted((k for k in header if k.isdigit()), key=int)]
    assert len(urls) == -(-len(data) // chunk)
    responses, parts = [], []
    for n, url in enumerate(urls, start=1):
        put = requests.put(url, data=data[(n - 1) * chunk : n * chunk], timeout=120)
        responses.append(put)
        parts.append({"partNumber": n, "etag": put.headers.get("ETag", "")})
    responses.append(
        requests.post(
            upload["href"],
            headers={"Accept": LFS_JSON, "Content-Type": LFS_JSON},
            data=json.dumps({"oid": oid, "parts": parts}),
            timeout=300,
        )
    )
    return responses
