"""A user's volume through the native API, as plain HTTP calls."""
from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import requests

from tests.support.hf import auth

MB = 10**6
MIB = 2**20


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Vol:
    """A user's volume, seen through plain HTTP calls."""

    def __init__(self, hub, token: str | None) -> None:
        self.hub, self.token = hub, token
        self.base = f"{hub.url}/api/volume"

    def headers(self, extra: dict | None = None) -> dict:
        return (auth(self.token) if self.token else {}) | (extra or {})

    def url(self, path: str) -> str:
        return f"{self.base}/files/{quote(path)}"

    def put(self, path: str, data: bytes, headers: dict | None = None) -> requests.Response:
        return requests.put(self.url(path), data=data, headers=self.headers(headers), timeout=120)

    def get(self, path: str, headers: dict | None = None) -> requests.Response:
        return requests.get(self.url(path), headers=self.headers(headers), timeout=120)

    def head(self, path: str) -> requests.Response:
        return requests.head(self.url(path), headers=self.headers(), timeout=30)

    def delete(self, path: str, recursive: bool = False, headers: dict | None = None) -> requests.Response:
        return requests.delete(self.url(path), params={"recursive": "true"} if recursive else None,
                               headers=self.headers(headers), timeout=60)

    def ls(self, path: str = "", **params) -> requests.Response:
        return requests.get(f"{self.base}/ls", params={"path": path, **params}, headers=self.headers(), timeout=30)

    def ls_all(self, path: str = "", limit: int | None = None) -> tuple[list[dict], int]:
        """Every entry of a directory, following the cursors; and the number of pages."""
        items, cursor, pages = [], None, 0
        while True:
            params = {"cursor": cursor} if cursor else {}
            if limit:
                params["limit"] = limit
            resp = self.ls(path, **params)
            assert resp.status_code == 200, resp.text
            items += resp.json()["items"]
            pages += 1
            cursor = resp.json()["next_cursor"]
            if cursor is None:
                return items, pages

    def stat(self, path: str) -> requests.Response:
        return requests.get(f"{self.base}/stat", params={"path": path}, headers=self.headers(), timeout=30)

    def mkdir(self, path: str, parents: bool = False) -> requests.Response:
        return requests.post(f"{self.base}/mkdir", json={"path": path, "parents": parents}, headers=self.headers(),
                             timeout=30)

    def move(self, src: str, dst: str, **kw) -> requests.Response:
        return requests.post(f"{self.base}/move", json={"src": src, "dst": dst, **kw}, headers=self.headers(),
                             timeout=60)

    def quota(self) -> dict:
        resp = requests.get(f"{self.hub.url}/api/quota", headers=self.headers(), timeout=30)
        assert resp.status_code == 200, resp.text
        return resp.json()

    def fill(self, directory: str, n: int, size: int = 64) -> dict[str, bytes]:
        """n small files of distinct content under `directory`, written 8 at a time."""
        files = {f"{directory}/f{i:04d}.bin": os.urandom(size) for i in range(n)}
        with ThreadPoolExecutor(8) as pool:
            for resp in pool.map(lambda kv: self.put(*kv), files.items()):
                assert resp.status_code == 201, resp.text
        return files


def error_of(resp: requests.Response) -> tuple[int, str, str]:
    body = resp.json()
    return resp.status_code, body["code"], body["error"]
