"""Which credential opens which door, tried as an attacker would, on both backends over HTTP.

* API tokens open the API and the Hugging Face protocol routes only; every web page and the admin
  refuse them (403), even a superuser's write token, so no token can mint a token, change a password
  or reach a form.
* Every state-changing route of the hub (every URL pattern, checked against the server's own URL
  configuration, plus every admin page of every registered model) is sent a superuser's read-only
  token, an instance token, a revoked and an expired token: the database and the object store are
  byte-for-byte what they were before.
* A browser session cannot be used cross-site: the protocol's write routes are exempt from Django's
  CSRF middleware for the sake of token clients, so a session-authenticated write to them must pass
  the CSRF check (Origin, token) itself; token requests stay CSRF-free.
"""
from __future__ import annotations

import base64
import hashlib
import json
import uuid

import pytest
import requests

ROUTES = """
import json, sys
from django.contrib import admin
from django.urls import get_resolver, resolve
from django.urls.resolvers import URLResolver

def walk(patterns, prefix=""):
    for p in patterns:
        s = prefix + str(p.pattern).lstrip("^")
        if isinstance(p, URLResolver):
            if p.app_name == "admin":
                continue
            yield from walk(p.url_patterns, s.rstrip("$"))
        else:
            yield s

paths = json.loads(sys.stdin.read())
matched = {}
for path in paths:
    m = resolve(path.split("?")[0])
    matched[path] = m.route.lstrip("^")
models = [(m._meta.app_label, m._meta.model_name, str(m.objects.order_by("pk").values_list("pk", flat=True).first()))
          for m in admin.site._registry]
print(json.dumps({"all": sorted(set(walk(get_resolver().url_patterns))), "matched": matched, "admin": models}))
"""

# Everything the database holds (but the columns every authenticated request may touch: a token's
# last use, an instance's heartbeat) and every object in the store, as digests per table.
STATE = """
import hashlib, json
from django.apps import apps
from django.db import connection
from hub.content.blobs import object_store
VOLATILE = {"last_used", "last_heartbeat"}
out = {}
with connection.cursor() as cur:
    for model in apps.get_models(include_auto_created=True):
        table = model._meta.db_table
        cols = [f.column for f in model._meta.concrete_fields if f.column not in VOLATILE]
        cur.execute("SELECT " + ", ".join(connection.ops.quote_name(c) for c in cols) + " FROM "
                    + connection.ops.quote_name(table))
        rows = sorted(repr(r) for r in cur.fetchall())
        out[table] = f"{len(rows)} rows " + hashlib.sha256("\\n".join(rows).encode()).hexdigest()[:16]
store = object_store()
out["store objects"] = sorted(f"{key} {size}" for key, size, _ in store.list(""))
out["store uploads"] = sorted(f"{key} {uid}" for key, uid, _ in store.list_uploads(""))
print(json.dumps(out))
"""


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class World:
    """alice owns the repos; root is a superuser, whose credentials are the ones tried: a read-only
    token, an instance's token and a revoked token (the strongest credentials of each kind)."""

    def __init__(self, hub) -> None:
        self.hub = hub
        s = uuid.uuid4().hex[:6]
        self.alice, self.root = f"dalice{s}", f"droot{s}"
        self.alice_token = hub.token(self.alice)
        self.root_token = hub.token(self.root)
        hub.manage("shell", "-c", (
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.filter(username='{self.root}').update(is_superuser=True, is_staff=True)"))
        api = hub.api(self.alice_token)
        self.pub, self.gated = f"{self.alice}/pub", f"{self.alice}/gated"
        for repo in (self.pub, self.gated):
            api.create_repo(repo)
            api.upload_file(path_or_fileobj=b"bytes of " + repo.encode(), path_in_repo="f.txt", repo_id=repo)
        api.create_branch(self.pub, branch="keep")
        api.create_tag(self.pub, tag="v1")
        api.update_repo_settings(self.gated, gated="auto")
        self.head = api.repo_info(self.pub).sha
        # a pull request (with its opening comment) for the discussion routes to aim at
        self.pr = api.upload_file(path_or_fileobj=b"proposed", path_in_repo="p.txt", repo_id=self.pub, create_pr=True,
                                  commit_description="please review").pr_num
        self.comment = api.get_discussion_details(self.pub, self.pr).events[0].id
        root = auth(self.root_token)
        # bob's access to the gated repo is there to be rejected; carol has none, to be granted; root's
        # like of pub is there to be taken back.
        self.bob, self.carol = f"dbob{s}", f"dcarol{s}"
        r = requests.post(f"{hub.url}/api/v1/repos/model/{self.gated}/access", headers=auth(hub.token(self.bob)),
                          timeout=30)
        assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
        hub.token(self.carol)
        r = requests.post(f"{hub.url}/api/models/{self.pub}/like", headers=root, timeout=30)
        assert r.status_code == 200, r.text
        put = requests.put(f"{hub.url}/api/volume/files/secret.txt", data=b"root's own", headers=root, timeout=30)
        assert put.status_code == 201, put.text
        r = requests.post(f"{hub.url}/api/volume/uploads", json={"path": "big.bin", "size": 20 * 2**20},
                          headers=root, timeout=30)
        assert r.status_code == 201, r.text
        self.upload = r.json()["id"]
        r = requests.post(f"{hub.url}/api/instances", headers=root, timeout=30,
                          json={"name": f"d{s}", "mounts": [{"repo": self.pub}]})
        assert r.status_code == 201, r.text
        self.instance, self.instance_token = r.json()["id"], r.json()["token"]
        self.mount = requests.get(f"{hub.url}/api/instances/{self.instance}", headers=root,
                                  timeout=30).json()["mounts"][0]["id"]
        self.read_only = hub.token(self.root, read_only=True)
        self.revoked = hub.token(self.root)
        out = hub.manage("shell", "-c", (
            "from hub.accounts.models import ApiToken; from hub.accounts.services import hash_token, revoke_token; "
            f"revoke_token(ApiToken.objects.get(digest=hash_token('{self.revoked}'))); "
            f"print(ApiToken.objects.get(digest=hash_token('{self.root_token}')).pk)")).stdout
        self.root_token_id = out.strip().splitlines()[-1]
        self.expired = hub.manage("hub_token", self.root, "--expires", "1s").stdout.strip().splitlines()[-1]
        self.tokens = {"read_only": self.read_only, "instance": self.instance_token, "revoked": self.revoked,
                       "expired": self.expired}

    def state(self) -> dict:
        return json.loads(self.hub.manage("shell", "-c", STATE).stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def worlds():
    return {}


@pytest.fixture
def world(hub, worlds) -> World:
    if hub.name not in worlds:
        worlds[hub.name] = World(hub)
    return worlds[hub.name]


def _commit_body(w: World) -> bytes:
    lines = [{"key": "header", "value": {"summary": "forged"}},
             {"key": "file", "value": {"path": "forged.txt", "encoding": "base64",
                                       "content": base64.b64encode(b"forged").decode()}},
             {"key": "deletedFile", "value": {"path": "f.txt"}}]
    return "\n".join(json.dumps(x) for x in lines).encode()


SHA = "ab" * 32
BOGUS = "x" * 40  # not a valid capability (signed URL token)


def requests_for(w: World) -> list[tuple[str, str, dict]]:
    """One request (or more) for every route of the hub, aimed at something real where the route
    changes something: (method, path, requests keyword arguments)."""
    pub, gated, up, inst, m = w.pub, w.gated, w.upload, w.instance, w.mount
    js = lambda body: {"json": body}  # noqa: E731
    form = lambda body: {"data": body}  # noqa: E731
    return [
        # native API
        ("POST", "/api/schema", {}),
        ("POST", "/api/quota", {}),
        ("POST", "/api/volume/ls", {}),
        ("POST", "/api/volume/stat?path=secret.txt", {}),
        ("POST", "/api/volume/mkdir", js({"path": "made"})),
        ("POST", "/api/volume/move", js({"src": "secret.txt", "dst": "moved.txt"})),
        ("PUT", "/api/volume/files/secret.txt", {"data": b"overwritten"}),
        ("DELETE", "/api/volume/files/secret.txt", {}),
        ("POST", "/api/volume/uploads", js({"path": "other.bin", "size": 100})),
        ("DELETE", f"/api/volume/uploads/{up}", {}),
        ("POST", f"/api/volume/uploads/{up}/complete", js({})),
        ("PUT", f"/api/volume/uploads/{up}/parts/1?sig={BOGUS}", {"data": b"x" * 100}),
        ("POST", f"/api/volume/uploads/{up}/parts", js({"parts": {"1": SHA}})),
        ("POST", "/api/instances", js({"name": "forged"})),
        ("POST", "/api/instances/spec", {}),
        ("POST", "/api/instances/heartbeat", js({"agent": "forged"})),
        ("DELETE", f"/api/instances/{inst}", {}),
        ("POST", f"/api/instances/{inst}/mounts", js({"repo": gated})),
        ("DELETE", f"/api/instances/{inst}/mounts/{m}", {}),
        ("POST", f"/api/v1/repos/model/{pub}/manifest", {}),
        ("POST", f"/api/v1/repos/model/{gated}/access", {}),
        ("DELETE", f"/api/v1/uploads/{uuid.uuid4()}", {}),
        ("PATCH", f"/api/v1/uploads/{uuid.uuid4()}", js({"sha256": SHA})),
        ("POST", "/api/v1/uploads", js({"repo_type": "model", "repo_id": pub, "path": "w.bin", "size": 100})),
        ("POST", f"/api/v1/uploads/{uuid.uuid4()}/parts", js({"parts": {"1": SHA}})),
        ("POST", "/api/v1/mirrors", js({"repo": f"{w.alice}/mirrored", "source": "http://127.0.0.1:9/"})),
        ("POST", "/api/v1/mirrors/999999999", {}),
        ("POST", "/api/v1/mirrors/999999999/retry", {}),
        # Hugging Face protocol
        ("POST", "/api/whoami-v2", {}),
        ("POST", "/api/validate-yaml", js({"content": "---\nlicense: mit\n---\n"})),
        ("POST", "/api/settings/repositories", {}),
        ("POST", f"/api/organizations/{w.alice}/settings/repositories", {}),
        ("POST", "/api/repos/create", js({"name": "forged", "organization": w.alice})),
        ("DELETE", "/api/repos/delete", js({"name": "pub", "organization": w.alice})),
        ("POST", "/api/repos/move", js({"fromRepo": pub, "toRepo": f"{w.alice}/moved"})),
        ("POST", "/api/models", {}),
        ("POST", f"/api/models/{pub}", {}),
        ("POST", f"/api/models/{pub}/revision/main", {}),
        ("POST", f"/api/models/{pub}/tree/main", {}),
        ("POST", f"/api/models/{pub}/paths-info/main", js({"paths": ["f.txt"]})),
        ("POST", f"/api/models/{pub}/preupload/main", js({"files": [{"path": "w.bin", "size": 5}]})),
        ("POST", f"/api/models/{pub}/commit/main", {"data": _commit_body(w),
                                                     "headers": {"Content-Type": "application/x-ndjson"}}),
        ("POST", f"/api/models/{pub}/commits/main", {}),
        ("POST", f"/api/models/{pub}/refs", {}),
        ("POST", f"/api/models/{pub}/branch/forged", js({})),
        ("DELETE", f"/api/models/{pub}/branch/keep", {}),
        ("POST", f"/api/models/{pub}/tag/main", js({"tag": "forged"})),
        ("DELETE", f"/api/models/{pub}/tag/v1", {}),
        ("PUT", f"/api/models/{pub}/settings", js({"private": True})),
        ("POST", f"/api/models/{pub}/auth-check/write", {}),
        ("POST", f"/api/models/{pub}/duplicate", js({"repository": f"{w.root}/duplicated"})),
        ("POST", f"/api/models/{pub}/super-squash/main", js({"message": "forged"})),
        ("POST", f"/api/models/{pub}/lfs-files", {}),
        ("POST", f"/api/models/{pub}/lfs-files/batch",
         js({"deletions": {"sha": [hashlib.sha256(b"bytes of " + pub.encode()).hexdigest()], "rewriteHistory": True}})),
        ("POST", "/api/models/gpt2/commit/main", {"data": _commit_body(w),
                                                  "headers": {"Content-Type": "application/x-ndjson"}}),
        ("POST", "/gpt2/resolve/main/f.txt", {}),
        ("POST", f"/api/models/{pub}/xet-write-token/main", {}),
        ("POST", f"/api/models/{gated}/user-access-request/accepted", {}),
        ("POST", f"/api/models/{gated}/user-access-request/handle", js({"user": w.bob, "status": "rejected",
                                                                         "rejectionReason": "forged"})),
        ("POST", f"/api/models/{gated}/user-access-request/grant", js({"user": w.carol})),
        ("POST", f"/api/models/{gated}/like", {}),
        ("DELETE", f"/api/models/{pub}/like", {}),
        ("POST", f"/api/models/{pub}/likers", {}),
        ("POST", f"/api/users/{w.root}/likes", {}),
        ("DELETE", "/api/models/gpt2/like", {}),
        ("POST", f"/api/models/{pub}/preupload/main?create_pr=1", js({"files": [{"path": "w.bin", "size": 5}]})),
        ("POST", f"/api/models/{pub}/commit/main?create_pr=1", {"data": _commit_body(w),
                                                                "headers": {"Content-Type": "application/x-ndjson"}}),
        ("POST", f"/api/models/{pub}/commit/refs%2Fpr%2F{w.pr}", {"data": _commit_body(w),
                                                                 "headers": {"Content-Type": "application/x-ndjson"}}),
        ("POST", f"/api/models/{pub}/discussions", js({"title": "forged", "description": "x", "pullRequest": True})),
        ("POST", f"/api/models/{pub}/discussions/{w.pr}", {}),
        ("POST", f"/api/models/{pub}/discussions/{w.pr}/comment", js({"comment": "forged"})),
        ("POST", f"/api/models/{pub}/discussions/{w.pr}/comment/{w.comment}/edit", js({"content": "forged"})),
        ("POST", f"/api/models/{pub}/discussions/{w.pr}/comment/{w.comment}/hide", {}),
        ("POST", f"/api/models/{pub}/discussions/{w.pr}/title", js({"title": "forged title"})),
        ("POST", f"/api/models/{pub}/discussions/{w.pr}/status", js({"status": "closed"})),
        ("POST", f"/api/models/{pub}/discussions/{w.pr}/merge", {}),
        ("POST", f"/{pub}.git/info/lfs/objects/batch", js({"operation": "upload",
                                                            "objects": [{"oid": SHA, "size": 1000}]})),
        ("POST", f"/{pub}.git/info/lfs/verify", js({"oid": SHA, "size": 1000})),
        ("POST", f"/{pub}/resolve/main/f.txt", {}),
        ("PUT", f"/lfs/upload/{BOGUS}", {"data": b"x"}),
        ("PUT", f"/lfs/part/{BOGUS}", {"data": b"x"}),
        ("POST", f"/lfs/complete/{BOGUS}", js({})),
        ("POST", f"/lfs/objects/{BOGUS}", {}),
        ("POST", "/api/no-such-route", {}),
        # the dataset viewer (upstream's datasets-server routes; reads only)
        *[("POST", f"/api/datasets-server/{r}?dataset={pub}&config=default&split=train", {})
          for r in ("is-valid", "splits", "first-rows", "rows", "info", "size")],
        # the Xet CAS: it takes only the access tokens the xet-*-token routes sign, never an API token
        ("POST", f"/cas/v1/xorbs/default/{'a1' * 32}", {"data": b"x" * 100}),
        ("POST", "/cas/v1/shards", {"data": b"x" * 100}),
        ("POST", "/cas/v2/shards", {"data": b"x" * 100}),
        ("GET", f"/cas/v1/chunks/default/{'a1' * 32}", {}),
        ("GET", f"/cas/v1/reconstructions/{'a1' * 32}", {}),
        ("GET", f"/cas/v2/reconstructions/{'a1' * 32}", {}),
        ("POST", "/cas/v1/telemetry", {"data": b"{}"}),
        ("POST", "/v1/telemetry", {"data": b"{}"}),
        ("GET", f"/cas/fetch/{BOGUS}", {}),
        # web pages and their forms
        ("POST", "/", {}),
        ("POST", "/healthz", {}),
        ("POST", "/favicon.ico", {}),
        ("POST", "/models", {}),
        ("POST", "/accounts/login", form({"username": w.root, "password": "guess"})),
        ("POST", "/accounts/logout", {}),
        ("POST", "/settings", {}),
        ("POST", f"/settings/uploads/{up}/abort", {}),
        ("POST", "/settings/language", form({"language": "zh-hans", "next": "/"})),
        ("POST", "/settings/volume", {}),
        ("POST", "/settings/volume/file?path=secret.txt", {}),
        ("POST", "/settings/volume/upload", {"data": {"path": ""}, "files": {"file": ("up.txt", b"uploaded")}}),
        ("POST", "/settings/volume/mkdir", form({"path": "", "name": "webdir"})),
        ("POST", "/settings/volume/rename", form({"src": "secret.txt", "dst": "renamed.txt"})),
        ("POST", "/settings/volume/delete", form({"target": "secret.txt"})),
        ("POST", "/settings/tokens", form({"name": "minted", "role": "write"})),
        ("POST", f"/settings/tokens/{w.root_token_id}/revoke", {}),
        ("POST", "/settings/instances", form({"name": "webinst"})),
        ("POST", f"/settings/instances/{inst}/attach", form({"repo": gated, "type": "model"})),
        ("POST", f"/settings/instances/{inst}/mounts/{m}/detach", {}),
        ("POST", f"/settings/instances/{inst}/revoke", {}),
        ("POST", f"/models/{pub}", {}),
        ("POST", f"/{pub}", {}),
        ("POST", f"/{pub}/tree/main", {}),
        ("POST", f"/{pub}/blob/main/f.txt", {}),
        ("POST", f"/{pub}/commits/main", {}),
        ("POST", f"/{pub}/commit/{w.head}", {}),
        ("POST", f"/{pub}/refs", {}),
        ("POST", f"/{gated}/access", {}),
        ("POST", f"/{gated}/like", form({"liked": "1"})),
        ("POST", f"/{pub}/pin", {}),
        ("POST", f"/{gated}/access-requests", {}),
        ("POST", f"/{gated}/access-requests/handle", form({"user": w.bob, "status": "rejected"})),
        ("POST", f"/{gated}/access-requests/grant", form({"user": w.carol})),
        ("POST", f"/{pub}/discussions", {}),
        ("POST", f"/{pub}/discussions/new", form({"title": "forged", "description": "x"})),
        ("POST", f"/{pub}/discussions/{w.pr}", {}),
        ("POST", f"/{pub}/discussions/{w.pr}/comment", form({"comment": "forged"})),
        ("POST", f"/{pub}/discussions/{w.pr}/status", form({"status": "closed"})),
        ("POST", f"/{pub}/discussions/{w.pr}/merge", {}),
    ]


def admin_requests(models: list[tuple[str, str, str]], root_pk: str) -> list[tuple[str, str, dict]]:
    """Every admin page that changes something, for every model the admin registers."""
    out = [("POST", "/admin/", {}), ("POST", "/admin/login/", {"data": {"username": "x", "password": "y"}}),
           ("POST", "/admin/logout/", {}),
           ("POST", "/admin/password_change/", {"data": {"old_password": "x", "new_password1": "Forged-pw-1",
                                                          "new_password2": "Forged-pw-1"}}),
           ("POST", f"/admin/auth/user/{root_pk}/password/", {"data": {"password1": "Forged-pw-1",
                                                                      "password2": "Forged-pw-1"}}),
           ("POST", "/admin/auth/user/add/", {"data": {"username": "forged", "password1": "Forged-pw-1",
                                                       "password2": "Forged-pw-1"}})]
    for app, model, pk in models:
        base = f"/admin/{app}/{model}/"
        out += [("POST", f"{base}add/", {"data": {}}),
                ("POST", base, {"data": {"action": "delete_selected", "_selected_action": pk, "post": "yes"}})]
        if pk != "None":
            out += [("POST", f"{base}{pk}/change/", {"data": {}}),
                    ("POST", f"{base}{pk}/delete/", {"data": {"post": "yes"}})]
    return out


def is_api(path: str) -> bool:
    return path.startswith(("/api/", "/lfs/")) or ".git/info/lfs/" in path or "/resolve/" in path


# What an instance token is for: its owner's volume (the mount writes checkpoints there) and its
# own heartbeat. Those change things by design (tests/test_access_matrix.py); everything else must not.
INSTANCE_MAY = ("/api/volume/", "/api/instances/heartbeat")


@pytest.fixture
def routes(world):
    reqs = requests_for(world)
    out = world.hub.manage("shell", "-c", ROUTES.replace("sys.stdin.read()", repr(json.dumps([p for _, p, _ in reqs]))))
    return reqs, json.loads(out.stdout.strip().splitlines()[-1])


def test_every_route_of_the_hub_is_in_the_table(routes):
    reqs, found = routes
    tried = set(found["matched"].values())
    assert not set(found["all"]) - tried, f"routes no request here tries: {sorted(set(found['all']) - tried)}"
    assert len(found["admin"]) >= 10  # every registered model gets its add/change/delete/action pages tried
    print(f"\n{len(found['all'])} routes, all tried; {len(found['admin'])} admin models")


@pytest.mark.parametrize("actor", ["read_only", "instance", "revoked", "expired"])
def test_no_route_changes_anything_for_a_read_only_instance_revoked_or_expired_token(world, routes, actor):
    reqs, found = routes
    token = world.tokens[actor]
    root_pk = world.hub.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model; "
        f"print(get_user_model().objects.get(username='{world.root}').pk)")).stdout.strip().splitlines()[-1]
    todo = reqs + admin_requests(found["admin"], root_pk)
    if actor == "instance":
        todo = [r for r in todo if not r[1].startswith(INSTANCE_MAY)]
    before = world.state()
    wrong = []
    s = requests.Session()
    for method, path, kwargs in todo:
        kwargs = dict(kwargs)
        headers = auth(token) | kwargs.pop("headers", {})
        r = s.request(method, world.hub.url + path, headers=headers, timeout=60, allow_redirects=False, **kwargs)
        if path.startswith("/cas/fetch/"):  # (the URL is the capability: a bogus one is no xorb)
            ok = r.status_code == 404
        elif path.startswith(("/cas/", "/v1/")):
            ok = r.status_code == 401 and "Xet access token" in r.text
        elif not is_api(path):
            ok = r.status_code == 403 and "sign in at /accounts/login" in r.text
        elif actor in ("revoked", "expired"):
            ok = r.status_code == 401
        else:
            ok = r.status_code in (403, 404, 405) or (r.ok and method == "POST" and (
                "paths-info" in path or "validate-yaml" in path))  # (reads sent as POST)
        if not ok:
            wrong.append(f"{method} {path}: {r.status_code} {r.text[:160]}")
    after = world.state()
    changed = {k: (before.get(k), after.get(k)) for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert not changed, f"{actor}: these changed: {changed}"
    assert not wrong, f"{actor}: unexpected answers:\n" + "\n".join(wrong)
    assert len(todo) > 100
    print(f"\n{actor}: {len(todo)} requests ({len(reqs)} to the hub's routes, the rest to the admin's pages), "
          f"nothing changed")


def test_web_pages_and_the_admin_refuse_even_a_superusers_write_token(world):
    h = auth(world.root_token)
    for method, path, data in [("GET", "/settings", None), ("GET", "/admin/", None),
                               ("POST", "/settings/tokens", {"name": "minted", "role": "write"}),
                               ("POST", "/admin/auth/user/add/", {"username": "forged", "password1": "Forged-pw-1",
                                                                  "password2": "Forged-pw-1"}),
                               ("GET", f"/{world.pub}", None)]:
        r = requests.request(method, world.hub.url + path, data=data, headers=h, timeout=30, allow_redirects=False)
        assert r.status_code == 403, (path, r.status_code, r.text[:200])
        assert r.json()["code"] == "Forbidden"
        assert "API tokens open the API" in r.json()["error"] and "/accounts/login" in r.json()["error"]
    # ... while the same token opens the API, and root's session opens the pages and the admin.
    assert requests.get(f"{world.hub.url}/api/whoami-v2", headers=h, timeout=30).json()["name"] == world.root
    s = world.hub.session(world.root)
    assert s.get(f"{world.hub.url}/settings/tokens", timeout=30).status_code == 200
    assert s.get(f"{world.hub.url}/admin/auth/user/", timeout=30).status_code == 200
    names = world.hub.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model; from hub.accounts.models import ApiToken; "
        "print(get_user_model().objects.filter(username='forged').exists(), "
        "ApiToken.objects.filter(name='minted').exists())")).stdout.split()[-2:]
    assert names == ["False", "False"]


# --- cross-site writes with the session cookie ------------------------------------------------------------

EVIL = {"Origin": "http://evil.example", "Content-Type": "text/plain"}


def _cross_site(w: World, s: requests.Session) -> dict[str, requests.Response]:
    """What a plain HTML form on another site can make a signed-in browser send: the session cookie,
    a foreign Origin, text/plain bodies."""
    url = w.hub.url
    commit = "\n".join(json.dumps(x) for x in [
        {"key": "header", "value": {"summary": "cross-site"}},
        {"key": "file", "value": {"path": "xs.txt", "encoding": "base64", "content": base64.b64encode(b"x").decode()}}])
    return {
        "create": s.post(f"{url}/api/repos/create", data=json.dumps({"name": "xsite", "organization": w.alice}),
                         headers=EVIL, timeout=30),
        "commit": s.post(f"{url}/api/models/{w.pub}/commit/main", data=commit, headers=EVIL, timeout=30),
        "move": s.post(f"{url}/api/repos/move", data=json.dumps({"fromRepo": w.pub, "toRepo": f"{w.alice}/xmoved"}),
                       headers=EVIL, timeout=30),
        "tag": s.post(f"{url}/api/models/{w.pub}/tag/main", data=json.dumps({"tag": "xsite"}), headers=EVIL,
                      timeout=30),
        "settings": s.put(f"{url}/api/models/{w.pub}/settings", data=json.dumps({"private": True}), headers=EVIL,
                          timeout=30),
        "discussion comment": s.post(f"{url}/api/models/{w.pub}/discussions/{w.pr}/comment",
                                     data=json.dumps({"comment": "cross-site"}), headers=EVIL, timeout=30),
        "merge": s.post(f"{url}/api/models/{w.pub}/discussions/{w.pr}/merge", data="{}", headers=EVIL, timeout=30),
        "volume mkdir": s.post(f"{url}/api/volume/mkdir", data=json.dumps({"path": "xsite"}),
                               headers=EVIL | {"Content-Type": "application/json"}, timeout=30),
        # Same site, but no CSRF token: another port of this host, a sibling subdomain.
        "no csrf token": s.post(f"{url}/api/repos/create", json={"name": "xsite2", "organization": w.alice},
                                headers={"Origin": url}, timeout=30),
    }


def test_a_session_cookie_alone_cannot_write_through_the_api(world):
    s = world.hub.session(world.alice)
    before = world.state()
    for what, r in _cross_site(world, s).items():
        assert r.status_code == 403, (what, r.status_code, r.text[:300])
        assert "CSRF" in r.json()["error"], (what, r.text[:300])
    assert world.state() == before
    # The same session may read through the API, and its writes work from the hub's own pages, which
    # send the CSRF token.
    assert s.get(f"{world.hub.url}/api/models/{world.pub}", timeout=30).status_code == 200
    s.get(f"{world.hub.url}/settings", timeout=30)
    r = s.post(f"{world.hub.url}/api/repos/create", json={"name": f"same-site-{uuid.uuid4().hex[:6]}"},
               headers={"Origin": world.hub.url, "X-CSRFToken": s.cookies["csrftoken"]}, timeout=30)
    assert r.status_code == 200, r.text


def test_token_requests_need_no_csrf_token_whatever_their_origin(world, unique):
    r = requests.post(f"{world.hub.url}/api/repos/create", data=json.dumps({"name": f"tok-{unique}"}),
                      headers=auth(world.alice_token) | EVIL, timeout=30)
    assert r.status_code == 200, r.text
    assert world.hub.api(world.alice_token).repo_info(f"{world.alice}/tok-{unique}").id == f"{world.alice}/tok-{unique}"
