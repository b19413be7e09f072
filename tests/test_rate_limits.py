"""Rate limits on authentication and token creation, and the request size limit, on a server of
their own with low limits: guessing tokens gets 429 with Retry-After after a handful of tries (a
valid token still works), a user creating instances (each a new token) in a burst is slowed down,
and a request body over HUB_MAX_REQUEST_BODY is refused with 413 and a sentence saying so."""
from __future__ import annotations

import time
import zlib

import pytest
import requests

from tests.support.servers import Hub, base_env


@pytest.fixture(scope="module")
def strict_hub(tmp_path_factory):
    data = tmp_path_factory.mktemp("strict")
    import redis

    cache = "redis://127.0.0.1:6379/14"  # shared by the server's workers, as in production
    redis.Redis.from_url(cache).flushdb()
    hub = Hub("strict", base_env() | {"HUB_DATA_DIR": str(data), "HUB_AUTH_FAIL_RATE": "5/m",
                                      "HUB_TOKEN_CREATE_RATE": "3/m", "HUB_CACHE_URL": cache,
                                      "HUB_MAX_REQUEST_BODY": "1MiB"}, data)
    hub.start(data / "server.log")
    yield hub
    hub.stop()


def fresh_window(key: str, period: int = 60, need: float = 10) -> None:
    """Waits, if need be, until the rate limit's window for `key` has `need` seconds left: its
    windows end at a fixed second of each period, one of its own per key (django-ratelimit's
    _get_window), and requests on both sides of that second are counted in two windows."""
    now = time.time()
    end = int(now) - int(now) % period + zlib.crc32(key.encode()) % period
    if end < now:
        end += period
    if end - now < need:
        time.sleep(end - now + 0.2)


def test_guessing_tokens_is_cut_off_with_429_and_a_retry_hint(strict_hub):
    good = strict_hub.token("ratelimited")
    fresh_window("127.0.0.1")  # (the client address is the key)
    statuses = []
    for i in range(12):
        r = requests.get(f"{strict_hub.url}/api/whoami-v2", headers={"Authorization": f"Bearer hub_guess{i}"},
                         timeout=30)
        statuses.append(r.status_code)
    assert statuses == [401] * 5 + [429] * 7, statuses
    last = requests.get(f"{strict_hub.url}/api/whoami-v2", headers={"Authorization": "Bearer hub_guess"}, timeout=30)
    assert last.status_code == 429 and int(last.headers["Retry-After"]) > 0
    assert "wrong token" in last.json()["error"]
    # a valid token is not locked out by someone else's guessing
    ok = requests.get(f"{strict_hub.url}/api/whoami-v2", headers={"Authorization": f"Bearer {good}"}, timeout=30)
    assert ok.status_code == 200 and ok.json()["name"] == "ratelimited"


def test_creating_tokens_in_a_burst_is_slowed_down(strict_hub):
    token = strict_hub.token("burster")
    pk = strict_hub.manage("shell", "-c", "from django.contrib.auth import get_user_model as m; "
                                          "print(m().objects.get(username='burster').pk)").stdout.split()[-1]
    fresh_window(pk)  # (the user is the key)
    statuses = [requests.post(f"{strict_hub.url}/api/instances", headers={"Authorization": f"Bearer {token}"},
                              json={"name": f"i{i}"}, timeout=30).status_code for i in range(10)]
    assert statuses == [201] * 3 + [429] * 7, statuses


def test_a_request_body_over_the_limit_is_refused_with_413(strict_hub):
    token = strict_hub.token("bigbody")
    headers = {"Authorization": f"Bearer {token}"}
    big = {"name": "x", "padding": "a" * (2 * 2**20)}
    for path in ("/api/repos/create", "/api/instances", "/api/volume/mkdir"):
        r = requests.post(f"{strict_hub.url}{path}", json=big, headers=headers, timeout=60)
        assert r.status_code == 413, (path, r.status_code, r.text[:200])
        assert "too large" in r.json()["error"]
    # under the limit, the same calls work
    assert requests.post(f"{strict_hub.url}/api/volume/mkdir", json={"path": "ok"}, headers=headers,
                         timeout=60).status_code == 201
