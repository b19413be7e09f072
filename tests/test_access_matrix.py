"""The access-control matrix: every endpoint × actor × resource, with the exact outcome, on both
backends over HTTP. Private things are 404 to outsiders; tokens are hashed, scoped, revocable;
instance tokens reach only their instance's repos and their owner's volume; gated repos need
their conditions accepted before a download (huggingface_hub raises GatedRepoError).

The number of cases is written to tests/artifacts/access-matrix.txt (quoted in SECURITY.md)."""
from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import requests
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import GatedRepoError

ARTIFACTS = Path(__file__).parent / "artifacts"
OK = "ok"  # any 2xx or 3xx
ACTORS = ["anonymous", "owner", "member", "other", "read_only", "revoked", "instance", "admin"]
RESOURCES = ["public", "private", "org_private", "gated"]


class World:
    """Users, tokens and resources of one matrix run (fresh names per run)."""

    def __init__(self, hub) -> None:
        self.hub = hub
        s = uuid.uuid4().hex[:6]
        self.owner_name, self.member_name, self.other_name = f"mowner{s}", f"mmember{s}", f"mother{s}"
        self.org = f"morg{s}"
        self.tokens = {
            "anonymous": None,
            "owner": hub.token(self.owner_name),
            "member": hub.token(self.member_name),
            "other": hub.token(self.other_name),
            "read_only": hub.token(self.owner_name, read_only=True),
            "admin": hub.token(f"madmin{s}"),
        }
        self.admin_name = f"madmin{s}"
        self.sessions: dict[str, requests.Session] = {}
        hub.manage("shell", "-c", (
            "from django.contrib.auth import get_user_model; from hub.accounts import services as a; "
            "from hub.accounts.models import Namespace; U = get_user_model(); "
            f"U.objects.filter(username='madmin{s}').update(is_superuser=True, is_staff=True); "
            f"org = a.do_create_org('{self.org}', U.objects.get(username='{self.owner_name}')); "
            f"a.do_add_member(org, U.objects.get(username='{self.member_name}'), 'write')"))
        revoked = hub.token(self.owner_name)
        hub.manage("shell", "-c", (
            "from hub.accounts.models import ApiToken; from hub.accounts.services import hash_token, revoke_token; "
            f"revoke_token(ApiToken.objects.get(digest=hash_token('{revoked}')))"))
        self.tokens["revoked"] = revoked
        api = hub.api(self.tokens["owner"])
        self.repos = {"public": f"{self.owner_name}/pub", "private": f"{self.owner_name}/priv",
                      "org_private": f"{self.org}/team", "gated": f"{self.owner_name}/gated"}
        for kind, repo in self.repos.items():
            api.create_repo(repo, private=kind in ("private", "org_private"))
            api.upload_file(path_or_fileobj=f"{kind} bytes".encode(), path_in_repo="f.txt", repo_id=repo)
        api.update_repo_settings(self.repos["gated"], gated="auto")
        r = requests.post(f"{hub.url}/api/instances", headers=self.auth("owner"), timeout=30,
                          json={"name": f"m{s}", "mounts": [{"repo": self.repos["private"]},
                                                            {"repo": self.repos["gated"]}]})
        assert r.status_code == 201, r.text
        self.instance_id = r.json()["id"]
        self.tokens["instance"] = r.json()["token"]
        # the owner's volume holds a file; everybody else's volume is their own
        requests.put(f"{hub.url}/api/volume/files/secret.txt", data=b"owner's", headers=self.auth("owner"),
                     timeout=30).raise_for_status()

    def auth(self, actor: str) -> dict:
        token = self.tokens[actor]
        return {"Authorization": f"Bearer {token}"} if token else {}


@pytest.fixture(scope="module")
def worlds():
    return {}


@pytest.fixture
def world(hub, worlds) -> World:
    if hub.name not in worlds:
        worlds[hub.name] = World(hub)
    return worlds[hub.name]


def outcome(resp: requests.Response) -> str | int:
    return OK if resp.status_code < 400 else resp.status_code


def read_expectation(actor: str, resource: str, *, download: bool) -> str | int:
    if actor == "revoked":
        return 401
    if actor == "instance":  # only attached repos; a gated one because its owner needs no acceptance
        return OK if resource in ("private", "gated") else 404
    visible = {"public": True, "gated": True, "private": actor in ("owner", "read_only", "admin"),
               "org_private": actor in ("owner", "member", "read_only", "admin")}[resource]
    if not visible:
        return 404
    if download and resource == "gated" and actor in ("anonymous", "member", "other"):
        return 401 if actor == "anonymous" else 403
    return OK


def write_expectation(actor: str, resource: str) -> str | int:
    if actor == "revoked":
        return 401
    if actor == "anonymous":  # "log in" where the repo is visible; missing where it is not
        return 401 if resource in ("public", "gated") else 404
    if actor == "instance":
        return 403
    readable = read_expectation(actor, resource, download=False) == OK
    if not readable:
        return 404
    can_write = actor in ("owner", "admin") or (actor == "member" and resource == "org_private")
    if actor == "read_only":
        return 403
    return OK if can_write else 403


READS = {
    "repo_info": lambda w, repo: ("GET", f"/api/models/{repo}", None),
    "tree": lambda w, repo: ("GET", f"/api/models/{repo}/tree/main", None),
    "refs": lambda w, repo: ("GET", f"/api/models/{repo}/refs", None),
    "commits": lambda w, repo: ("GET", f"/api/models/{repo}/commits/main", None),
}
DOWNLOADS = {
    "resolve": lambda w, repo: ("GET", f"/{repo}/resolve/main/f.txt", None),
    "manifest": lambda w, repo: ("GET", f"/api/v1/repos/model/{repo}/manifest", None),
}
WRITES = {
    "commit": lambda w, repo: ("POST", f"/api/models/{repo}/commit/main", "commit"),
    "branch": lambda w, repo: ("POST", f"/api/models/{repo}/branch/b-{uuid.uuid4().hex[:6]}", {}),
    "settings": lambda w, repo: ("PUT", f"/api/models/{repo}/settings", {}),
}

# Routes of people's own doing rather than the repo's: liking it (a write in the caller's name, on
# anything they can read), and the gate's access requests (its namespace's writers only, and only
# where there is a gate).
PEOPLE = {
    "like": lambda w, repo: ("POST", f"/api/models/{repo}/like", None),
    "access_requests": lambda w, repo: ("GET", f"/api/models/{repo}/user-access-request/pending", None),
}


def people_expectation(endpoint: str, actor: str, resource: str) -> str | int:
    if actor == "instance":
        return 403  # neither is in an instance token's scope
    if endpoint == "access_requests":
        want = write_expectation(actor, resource)
        return 400 if want == OK and resource != "gated" else want  # no gate, no requests
    if actor in ("anonymous", "revoked"):
        return 401 if actor == "revoked" or read_expectation(actor, resource, download=False) == OK else 404
    readable = read_expectation(actor, resource, download=False) == OK
    if not readable:
        return 404
    return 403 if actor == "read_only" else OK


WEB = {
    "web_repo_page": lambda w, repo: ("GET", f"/{repo}", None),
    "web_files": lambda w, repo: ("GET", f"/{repo}/tree/main", None),
    "web_history": lambda w, repo: ("GET", f"/{repo}/commits/main", None),
    "web_refs": lambda w, repo: ("GET", f"/{repo}/refs", None),
}


def web_expectation(actor: str, resource: str) -> str | int:
    if actor in ("read_only", "revoked", "instance"):
        return 403  # pages open to a signed-in session only: API tokens are refused there
    return read_expectation(actor, resource, download=False)


SESSION_USERS = {"owner": "owner_name", "member": "member_name", "other": "other_name", "admin": "admin_name"}


def web_session(w: World, actor: str) -> requests.Session:
    """The actor signed in to the web pages (the person behind the token), or a plain session for the
    others: anonymous sends nothing, the token actors send their token."""
    if actor not in w.sessions:
        w.sessions[actor] = (w.hub.session(getattr(w, SESSION_USERS[actor])) if actor in SESSION_USERS
                             else requests.Session())
    return w.sessions[actor]


def send(w: World, actor: str, method: str, path: str, body, *, web: bool = False) -> requests.Response:
    if web:
        headers = {} if actor in SESSION_USERS else w.auth(actor)
        return web_session(w, actor).request(method, w.hub.url + path, headers=headers, timeout=30,
                                              allow_redirects=False)
    headers = w.auth(actor)
    if body == "commit":
        lines = [{"key": "header", "value": {"summary": "matrix"}},
                 {"key": "file", "value": {"path": f"m-{uuid.uuid4().hex[:6]}.txt", "encoding": "base64",
                                           "content": base64.b64encode(b"x").decode()}}]
        return requests.post(w.hub.url + path, data="\n".join(json.dumps(x) for x in lines),
                             headers=headers | {"Content-Type": "application/x-ndjson"}, timeout=30,
                             allow_redirects=False)
    return requests.request(method, w.hub.url + path, json=body, headers=headers, timeout=30, allow_redirects=False)


CASES = ([(e, a, r, "read") for e in READS for a in ACTORS for r in RESOURCES]
         + [(e, a, r, "web") for e in WEB for a in ACTORS for r in RESOURCES]
         + [(e, a, r, "download") for e in DOWNLOADS for a in ACTORS for r in RESOURCES]
         + [(e, a, r, "write") for e in WRITES for a in ACTORS for r in RESOURCES]
         + [(e, a, r, "people") for e in PEOPLE for a in ACTORS for r in RESOURCES])


@pytest.mark.parametrize("endpoint, actor, resource, kind", CASES)
def test_repo_endpoints(world, endpoint, actor, resource, kind):
    table = {"read": READS, "download": DOWNLOADS, "write": WRITES, "web": WEB, "people": PEOPLE}[kind]
    method, path, body = table[endpoint](world, world.repos[resource])
    resp = send(world, actor, method, path, body, web=kind == "web")
    want = (write_expectation(actor, resource) if kind == "write"
            else people_expectation(endpoint, actor, resource) if kind == "people"
            else web_expectation(actor, resource) if kind == "web"
            else read_expectation(actor, resource, download=kind == "download"))
    assert outcome(resp) == want, f"{method} {path} as {actor}: {resp.status_code} {resp.text[:300]}"
    if kind == "web" and want == 403:
        assert "sign in at /accounts/login" in resp.text
    if want == 404:  # private things look exactly like missing things
        assert "not found" in resp.text.lower()
    if want in (401, 403) and resource == "gated" and kind == "download" and actor != "revoked":
        assert resp.headers.get("X-Error-Code") == "GatedRepo" or "GatedRepo" in resp.text


VOLUME = {
    "ls": ("GET", "/api/volume/ls", None),
    "read": ("GET", "/api/volume/files/secret.txt", None),
    "write": ("PUT", "/api/volume/files/mine.txt", b"mine"),
    "quota": ("GET", "/api/quota", None),
}


@pytest.mark.parametrize("op", list(VOLUME))
@pytest.mark.parametrize("actor", ACTORS)
def test_volumes_are_private_to_their_owner(world, actor, op):
    method, path, body = VOLUME[op]
    resp = requests.request(method, world.hub.url + path, data=body, headers=world.auth(actor), timeout=30,
                            allow_redirects=False)
    owners_volume = actor in ("owner", "instance", "read_only")
    if actor in ("anonymous", "revoked"):
        assert resp.status_code == 401, resp.text
    elif op == "write" and actor == "read_only":
        assert resp.status_code == 403 and "read-only" in resp.json()["error"]
    elif op == "read":
        # only the owner (and what acts for them) finds the owner's file; others have their own volume
        assert outcome(resp) == (OK if owners_volume else 404), resp.text
    elif op == "ls":
        names = [i["name"] for i in resp.json()["items"]]
        assert ("secret.txt" in names) == owners_volume
    else:
        assert outcome(resp) == OK, resp.text


INSTANCE_OPS = {
    "get": ("GET", "/api/instances/{id}"),
    "list": ("GET", "/api/instances"),
    "attach": ("POST", "/api/instances/{id}/mounts"),
    "spec": ("GET", "/api/instances/spec"),
}


@pytest.mark.parametrize("op", list(INSTANCE_OPS))
@pytest.mark.parametrize("actor", ACTORS)
def test_instances_belong_to_their_owner(world, actor, op):
    method, path = INSTANCE_OPS[op]
    body = {"repo": world.repos["public"]} if op == "attach" else None
    resp = requests.request(method, world.hub.url + path.format(id=world.instance_id), json=body,
                            headers=world.auth(actor), timeout=30)
    if actor in ("anonymous", "revoked"):
        want = 401
    elif op == "spec":
        want = OK if actor == "instance" else 403
    elif actor == "instance":
        want = 403  # an instance token cannot manage instances
    elif actor == "read_only":
        want = 403
    elif op in ("get", "attach"):
        want = OK if actor in ("owner", "admin") else 404
    else:
        want = OK
    assert outcome(resp) == want, f"{op} as {actor}: {resp.status_code} {resp.text[:300]}"
    if op == "attach" and resp.ok:  # put things back for the next actor
        requests.delete(f"{world.hub.url}/api/instances/{world.instance_id}/mounts/{resp.json()['id']}",
                        headers=world.auth("owner"), timeout=30).raise_for_status()


def test_the_hf_client_raises_gated_repo_error_until_the_conditions_are_accepted(world, hf_cache):
    repo = world.repos["gated"]
    token = world.tokens["other"]
    with pytest.raises(GatedRepoError):
        hf_hub_download(repo, "f.txt", endpoint=world.hub.url, token=token, cache_dir=hf_cache)
    state = requests.get(f"{world.hub.url}/api/v1/repos/model/{repo}/access", headers=world.auth("other"),
                         timeout=30).json()
    assert state["gated"] is True and state["accepted"] is False
    r = requests.post(f"{world.hub.url}/api/v1/repos/model/{repo}/access", headers=world.auth("other"), timeout=30)
    assert r.status_code == 200 and r.json()["accepted"] is True
    path = hf_hub_download(repo, "f.txt", endpoint=world.hub.url, token=token, cache_dir=hf_cache)
    assert open(path, "rb").read() == b"gated bytes"
    assert world.hub.api(world.tokens["owner"]).repo_info(repo).gated == "auto"


def test_tokens_are_stored_hashed_and_record_their_last_use(world):
    out = world.hub.manage("shell", "-c", (
        "from hub.accounts.models import ApiToken; "
        "print('\\n'.join(ApiToken.objects.values_list('digest', flat=True)))")).stdout
    digests = set(out.split())
    for actor, token in world.tokens.items():
        if token:
            assert token not in out, f"{actor}'s token is stored in clear"
            import hashlib

            assert hashlib.sha256(token.encode()).hexdigest() in digests
    out = world.hub.manage("shell", "-c", (
        "from hub.accounts.models import ApiToken; from hub.accounts.services import hash_token; "
        f"print(ApiToken.objects.get(digest=hash_token('{world.tokens['owner']}')).last_used is not None)")).stdout
    assert out.strip().endswith("True")


def test_presigned_urls_are_short_lived_and_bound_to_one_object(world):
    if not world.hub.env.get("HUB_STORAGE_URL"):
        pytest.skip("the local backend serves bytes itself: no presigned URLs")
    resp = send(world, "owner", "GET", f"/{world.repos['public']}/resolve/main/f.txt", None)
    assert resp.status_code == 302
    url = resp.headers["Location"]
    q = parse_qs(urlparse(url).query)
    assert int(q["X-Amz-Expires"][0]) <= 900
    assert requests.get(url, timeout=30).content == b"public bytes"
    other = send(world, "owner", "GET", f"/{world.repos['private']}/resolve/main/f.txt", None).headers["Location"]
    forged = urlparse(url)._replace(path=urlparse(other).path).geturl()  # same signature, another object
    assert requests.get(forged, timeout=30).status_code == 403


def test_zz_record_the_case_count():
    ARTIFACTS.mkdir(exist_ok=True)
    n = (len(CASES) + len(VOLUME) * len(ACTORS) + len(INSTANCE_OPS) * len(ACTORS) + 3)
    (ARTIFACTS / "access-matrix.txt").write_text(f"{n} cases per backend\n")
    assert n > 200
