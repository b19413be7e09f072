"""Accounts, tokens and organisation namespaces, through the management commands and the live API."""
from __future__ import annotations

import pytest
import requests
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError


def test_it_prints_a_new_token_alone_on_the_last_line(hub, unique):
    out = hub.manage("hub_token", f"user{unique}").stdout.strip().splitlines()
    token = out[-1]
    assert token.startswith("hub_") and " " not in token
    me = hub.api(token).whoami()
    assert me["name"] == f"user{unique}"
    assert me["auth"]["accessToken"]["role"] == "write"
    # A second call creates a second, different token for the same user.
    assert hub.token(f"user{unique}") != token


def test_it_makes_read_only_tokens(hub, unique):
    token = hub.token(f"ro{unique}", read_only=True)
    assert hub.api(token).whoami()["auth"]["accessToken"]["role"] == "read"


def test_it_refuses_reserved_and_malformed_user_names(hub):
    for name in ("api", "datasets", "bad name", "../x"):
        result = hub.manage("hub_token", name, check=False)
        assert result.returncode != 0
        assert "reserved" in result.stderr or "invalid" in result.stderr


def test_it_rejects_a_wrong_token_with_401(hub):
    resp = requests.get(f"{hub.url}/api/whoami-v2", headers={"Authorization": "Bearer hub_wrong"}, timeout=10)
    assert resp.status_code == 401
    assert "Invalid credentials" in resp.json()["error"]


def test_it_lets_organisation_members_act_by_role(hub, unique):
    org, alice, bob, carol, dave = f"org{unique}", f"alice{unique}", f"bob{unique}", f"carol{unique}", f"dave{unique}"
    tokens = {u: hub.token(u) for u in (alice, bob, carol, dave)}
    hub.manage("hub_org", org, "--owner", alice, "--member", bob, "--member", f"{carol}:read")
    repo_id = f"{org}/shared"
    hub.api(tokens[alice]).create_repo(repo_id, private=True)
    assert org in [o["name"] for o in hub.api(tokens[bob]).whoami()["orgs"]]

    hub.api(tokens[bob]).upload_file(path_or_fileobj=b"by bob", path_in_repo="bob.txt", repo_id=repo_id)
    assert hub.api(tokens[carol]).list_repo_files(repo_id) == [".gitattributes", "bob.txt"]
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(tokens[carol]).upload_file(path_or_fileobj=b"x", path_in_repo="carol.txt", repo_id=repo_id)
    assert err.value.response.status_code == 403
    with pytest.raises(RepositoryNotFoundError):
        hub.api(tokens[dave]).list_repo_files(repo_id)
    with pytest.raises(HfHubHTTPError):
        hub.api(tokens[dave]).create_repo(f"{org}/intruder")
