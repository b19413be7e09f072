"""Instances through the native API, over HTTP on both backends: registration by the owner and by
an operator, the mount spec and heartbeats with the instance token, attach/detach, revocation, and
the instance token's scope (its attached repos and its owner's volume, nothing else).
Personas: alice owns the instance, bob is another user, op is an operator (staff)."""
from __future__ import annotations

import pytest
import requests
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import HfHubHTTPError

from tests.support.hf import auth


@pytest.fixture
def op(hub) -> str:
    token = hub.cached_token("op")
    hub.manage("shell", "-c", "from django.contrib.auth import get_user_model; "
                              "get_user_model().objects.filter(username='op').update(is_staff=True)")
    return token


@pytest.fixture
def repos(hub, alice, unique) -> dict[str, str]:  # noqa: F811
    """alice's public dataset (with a v1 tag), private model and a repo she does not attach."""
    api = hub.api(alice)
    out = {"data": f"alice/corpus-{unique}", "model": f"alice/secret-{unique}", "other": f"alice/other-{unique}"}
    api.create_repo(out["data"], repo_type="dataset")
    api.upload_file(path_or_fileobj=b"a,b\n1,2\n", path_in_repo="train.csv", repo_id=out["data"], repo_type="dataset")
    api.create_tag(out["data"], tag="v1", repo_type="dataset")
    api.create_repo(out["model"], private=True)
    api.upload_file(path_or_fileobj=b'{"hidden": 64}', path_in_repo="config.json", repo_id=out["model"])
    api.create_repo(out["other"])
    api.upload_file(path_or_fileobj=b"other", path_in_repo="x.txt", repo_id=out["other"])
    return out


def call(hub, method: str, path: str, token: str | None, **kwargs) -> requests.Response:
    return requests.request(method, f"{hub.url}/api/instances{path}", headers=auth(token) if token else {},
                            timeout=60, **kwargs)


def register(hub, token: str, name: str, mounts: list[dict], **extra) -> requests.Response:
    return call(hub, "POST", "", token, json={"name": name, "mounts": mounts, **extra})


def head_of(hub, token: str, repo_id: str, repo_type: str = "model", revision: str = "main") -> str:
    return hub.api(token).repo_info(repo_id, repo_type=repo_type, revision=revision).sha


def test_the_owner_registers_an_instance_and_its_agent_reads_the_spec(hub, alice, repos, unique):  # noqa: F811
    r = register(hub, alice, f"gpu-{unique}", [
        {"repo": repos["data"], "type": "dataset", "revision": "v1"},
        {"repo": repos["model"], "path": "weights"},
    ])
    assert r.status_code == 201, r.text
    created = r.json()
    token = created["token"]
    assert created["owner"] == "alice" and created["status"] == "pending" and token.startswith("hub_")
    assert [(m["kind"], m["path"]) for m in created["mounts"]] == [
        ("dataset", f"datasets/{repos['data']}"), ("model", "weights")]

    spec = call(hub, "GET", "/spec", token)
    assert spec.status_code == 200, spec.text
    body = spec.json()
    assert body["instance"] == {"id": created["id"], "name": f"gpu-{unique}", "owner": "alice"}
    mounts = {m["path"]: m for m in body["mounts"]}
    assert set(mounts) == {f"datasets/{repos['data']}", "weights", "volume"}
    assert mounts[f"datasets/{repos['data']}"]["commit"] == head_of(hub, alice, repos["data"], "dataset", "v1")
    assert mounts[f"datasets/{repos['data']}"]["revision"] == "v1"
    assert mounts["weights"]["commit"] == head_of(hub, alice, repos["model"])
    assert mounts["volume"] == {"id": None, "kind": "volume", "repo_id": None, "revision": None, "commit": None,
                                "path": "volume", "read_only": False, "error": None}

    assert call(hub, "POST", "/heartbeat", token, json={"agent": "hub-mount/1 host-a"}).status_code == 204
    listed = call(hub, "GET", "", alice).json()
    mine = next(i for i in listed if i["id"] == created["id"])
    assert mine["status"] == "online" and mine["last_heartbeat"] and mine["agent"] == "hub-mount/1 host-a"
    assert "token" not in mine  # shown once, at registration


def test_the_instance_token_reads_only_its_repos_and_its_owners_volume(hub, alice, bob, repos, unique,  # noqa: F811
                                                                     hf_cache):
    token = register(hub, alice, f"gpu-{unique}", [{"repo": repos["model"]}]).json()["token"]
    # the attached private repo: readable with the stock client
    path = hf_hub_download(repos["model"], "config.json", endpoint=hub.url, token=token, cache_dir=hf_cache)
    assert open(path, "rb").read() == b'{"hidden": 64}'
    # alice's other repo and anyone's public repo: as missing as a repo that does not exist
    bob_repo = f"bob/public-{unique}"
    hub.api(bob).create_repo(bob_repo)
    for repo_id in (repos["other"], bob_repo):
        r = requests.get(f"{hub.url}/api/models/{repo_id}", headers=auth(token), timeout=30)
        assert r.status_code == 404, (repo_id, r.text)
    # no writes to repos, even the attached one
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(token).upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=repos["model"])
    assert err.value.response.status_code == 403
    # nothing outside the scope: listing repos, managing instances, creating repos
    for method, path in (("GET", "/api/models"), ("GET", "/api/instances"), ("POST", "/api/repos/create")):
        r = requests.request(method, f"{hub.url}{path}", headers=auth(token), json={"name": "x"}, timeout=30)
        assert r.status_code == 403, (path, r.text)
        assert "instance token" in r.json()["error"]
    # the owner's volume, read-write
    r = requests.put(f"{hub.url}/api/volume/files/ckpt/{unique}.bin", data=b"step 1", headers=auth(token), timeout=30)
    assert r.status_code in (200, 201), r.text
    r = requests.get(f"{hub.url}/api/volume/files/ckpt/{unique}.bin", headers=auth(alice), timeout=30)
    assert r.content == b"step 1"


def test_attach_and_detach_change_the_spec_and_the_tokens_reach(hub, alice, repos, unique):  # noqa: F811
    created = register(hub, alice, f"gpu-{unique}", []).json()
    iid, token = created["id"], created["token"]
    assert [m["kind"] for m in call(hub, "GET", "/spec", token).json()["mounts"]] == ["volume"]
    r = requests.get(f"{hub.url}/api/datasets/{repos['data']}", headers=auth(token), timeout=30)
    assert r.status_code == 404

    r = call(hub, "POST", f"/{iid}/mounts", alice, json={"repo": repos["data"], "type": "dataset"})
    assert r.status_code == 201, r.text
    mount_id = r.json()["id"]
    spec = call(hub, "GET", "/spec", token).json()["mounts"]
    assert [(m["repo_id"], m["revision"]) for m in spec] == [(repos["data"], "main"), (None, None)]
    assert requests.get(f"{hub.url}/api/datasets/{repos['data']}", headers=auth(token), timeout=30).ok

    assert call(hub, "DELETE", f"/{iid}/mounts/{mount_id}", alice).status_code == 204
    assert [m["kind"] for m in call(hub, "GET", "/spec", token).json()["mounts"]] == ["volume"]
    assert requests.get(f"{hub.url}/api/datasets/{repos['data']}", headers=auth(token), timeout=30).status_code == 404
    r = call(hub, "DELETE", f"/{iid}/mounts/{mount_id}", alice)
    assert r.status_code == 404 and "not attached" in r.json()["error"]


def test_revoking_an_instance_revokes_its_token(hub, alice, repos, unique):  # noqa: F811
    created = register(hub, alice, f"gpu-{unique}", [{"repo": repos["model"]}]).json()
    r = call(hub, "DELETE", f"/{created['id']}", alice)
    assert r.status_code == 200 and r.json()["status"] == "revoked"
    r = call(hub, "GET", "/spec", created["token"])
    assert r.status_code == 401 and "Invalid credentials" in r.json()["error"]
    r = requests.get(f"{hub.url}/api/volume/ls", headers=auth(created["token"]), timeout=30)
    assert r.status_code == 401
    # the name is free again; the revoked one stays listed
    assert register(hub, alice, f"gpu-{unique}", []).status_code == 201
    statuses = sorted(i["status"] for i in call(hub, "GET", "", alice).json() if i["name"] == f"gpu-{unique}")
    assert statuses == ["pending", "revoked"]


def test_an_operator_registers_instances_for_users_and_others_cannot(hub, alice, bob, op, repos,  # noqa: F811
                                                                    unique):
    r = register(hub, op, f"gpu-{unique}", [{"repo": repos["model"]}], owner="alice")
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["owner"] == "alice"
    assert any(i["id"] == created["id"] for i in call(hub, "GET", "", alice).json())
    assert any(i["id"] == created["id"] for i in call(hub, "GET", "?owner=alice", op).json())
    # bob is not an operator: neither for alice, nor can he see or revoke her instance
    r = register(hub, bob, f"gpu-{unique}", [], owner="alice")
    assert r.status_code == 403 and "operators" in r.json()["error"]
    assert call(hub, "GET", "?owner=alice", bob).status_code == 403
    for method in ("GET", "DELETE"):
        r = call(hub, method, f"/{created['id']}", bob)
        assert r.status_code == 404, r.text
    # an operator cannot attach a repo the owner cannot read
    bob_private = f"bob/private-{unique}"
    hub.api(bob).create_repo(bob_private, private=True)
    r = call(hub, "POST", f"/{created['id']}/mounts", op, json={"repo": bob_private})
    assert r.status_code == 404 and "not found" in r.json()["error"]


@pytest.mark.parametrize("mounts, status, words", [
    ([{"repo": "alice/does-not-exist"}], 404, "not found"),
    ([{"repo": "{model}", "revision": "no-such-branch"}], 404, "no-such-branch"),
    ([{"repo": "{model}", "path": "../../etc"}], 400, "'..'"),
    ([{"repo": "{model}", "path": "/abs"}], 201, None),  # leading '/' is the mount root itself
    ([{"repo": "{model}", "path": "volume/x"}], 400, "volume"),
    ([{"repo": "{model}", "path": "a"}, {"repo": "{data}", "type": "dataset", "path": "a/b"}], 409, "clashes"),
    ([{"repo": "{model}"}, {"repo": "{model}"}], 409, "attached twice"),
    ([{"repo": "no-slash"}], 400, "NAMESPACE/NAME"),
    ([{"repo": "{model}", "type": "space"}], 400, "type"),
])
def test_bad_registrations_say_what_is_wrong_and_create_nothing(hub, alice, repos, unique, mounts, status,  # noqa: F811
                                                                words):
    mounts = [{k: v.format(**repos) if isinstance(v, str) else v for k, v in m.items()} for m in mounts]
    r = register(hub, alice, f"bad-{unique}", mounts)
    assert r.status_code == status, r.text
    names = [i["name"] for i in call(hub, "GET", "", alice).json()]
    if status != 201:
        assert words in r.json()["error"]
        assert f"bad-{unique}" not in names


def test_registration_needs_a_write_token_of_a_user(hub, alice, unique):  # noqa: F811
    r = register(hub, None, f"x-{unique}", [])
    assert r.status_code == 401
    r = register(hub, hub.cached_token("alice", read_only=True), f"x-{unique}", [])
    assert r.status_code == 403 and "read-only" in r.json()["error"]
    inst = register(hub, alice, f"x-{unique}", []).json()
    r = register(hub, inst["token"], f"y-{unique}", [])
    assert r.status_code == 403 and "instance token" in r.json()["error"]
    r = register(hub, alice, f"x-{unique}", [])
    assert r.status_code == 409 and "already has an instance" in r.json()["error"]
    r = register(hub, alice, "bad name!", [])
    assert r.status_code == 400 and "instance name" in r.json()["error"]
    assert call(hub, "GET", "/spec", alice).status_code == 403  # a user token is not an instance


def test_the_schema_documents_the_instances_api(hub):
    schema = requests.get(f"{hub.url}/api/schema", params={"format": "json"}, timeout=30).json()
    paths = schema["paths"]
    for p in ("/api/instances", "/api/instances/spec", "/api/instances/heartbeat",
              "/api/instances/{instance_id}", "/api/instances/{instance_id}/mounts"):
        assert p in paths, sorted(paths)
