"""Gated repos with manual approval, and likes, through the stock huggingface_hub client against live hubs.

alice owns the repos; bob asks for access and likes things. What is asserted is what they see: the gate
huggingface_hub reports, the lists and statuses alice handles, download refused and then the bytes,
the likes counted in repo info and listings, and the pages that show all this."""
from __future__ import annotations

import datetime
import re

import pytest
import requests
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError
from huggingface_hub.hf_api import AccessRequest, User

from tests.conftest import one_backend

BYTES = b"weights that need approval\n"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def gated_repo(hub, alice: str, name: str, mode: str) -> str:
    """alice's model `name` holding config.json, gated with `mode`."""
    api = hub.api(alice)
    repo = f"alice/{name}"
    api.create_repo(repo)
    api.upload_file(path_or_fileobj=BYTES, path_in_repo="config.json", repo_id=repo)
    api.update_repo_settings(repo, gated=mode)
    return repo


def ask(hub, token: str, repo: str, **body) -> requests.Response:
    return requests.post(f"{hub.url}/api/v1/repos/model/{repo}/access", json=body or None, headers=auth(token),
                         timeout=30)


def download(hub, token: str, repo: str, cache) -> bytes:
    path = hf_hub_download(repo, "config.json", endpoint=hub.url, token=token, cache_dir=cache)
    with open(path, "rb") as f:
        return f.read()


def names(requests_: list[AccessRequest]) -> list[str | None]:
    return [r.username for r in requests_]


# --- manual approval ---------------------------------------------------------------------------------

def test_a_manual_gate_keeps_the_files_closed_until_alice_accepts_bobs_request(hub, alice, bob, unique, hf_cache):
    hub.manage("shell", "-c", "from django.contrib.auth import get_user_model; "
                              "get_user_model().objects.filter(username='bob').update(email='bob@example.org', "
                              "first_name='Bob', last_name='Builder')")
    repo = gated_repo(hub, alice, f"manual-{unique}", "manual")
    owner = hub.api(alice)
    assert owner.model_info(repo).gated == "manual"
    assert hub.api(bob).model_info(repo).gated == "manual"  # anyone who sees the repo sees how it is gated

    with pytest.raises(GatedRepoError, match="not in the authorized list"):
        download(hub, bob, repo, hf_cache)
    r = ask(hub, bob, repo, fields={"company": "Acme", "use": "research"})
    assert r.status_code == 200, r.text
    assert r.json() | {"conditions": ""} == {"repo": repo, "gated": True, "approval": "manual", "conditions": "",
                                             "accepted": False, "status": "pending", "rejection_reason": None}
    with pytest.raises(GatedRepoError, match="awaiting a review from the repo authors") as err:
        download(hub, bob, repo, hf_cache)
    assert err.value.response.status_code == 403
    assert ask(hub, bob, repo).json()["status"] == "pending"  # asking again changes nothing

    pending = list(owner.list_pending_access_requests(repo))
    assert names(pending) == ["bob"]
    assert list(owner.list_accepted_access_requests(repo)) == list(owner.list_rejected_access_requests(repo)) == []
    mine = pending[0]
    assert (mine.status, mine.fullname, mine.email) == ("pending", "Bob Builder", "bob@example.org")
    assert mine.fields == {"company": "Acme", "use": "research"}
    assert isinstance(mine.timestamp, datetime.datetime)
    assert abs(mine.timestamp - datetime.datetime.now(datetime.UTC)) < datetime.timedelta(minutes=5)
    assert re.fullmatch(r"[0-9a-f]{24}", mine.request_id)

    owner.accept_access_request(repo, "bob")
    assert download(hub, bob, repo, hf_cache) == BYTES
    assert names(owner.list_accepted_access_requests(repo)) == ["bob"]
    assert list(owner.list_pending_access_requests(repo)) == []
    assert ask(hub, bob, repo).json()["accepted"] is True


def test_a_rejected_request_says_why_and_stays_rejected_until_alice_reconsiders(hub, alice, bob, unique, hf_cache):
    repo = gated_repo(hub, alice, f"reject-{unique}", "manual")
    owner = hub.api(alice)
    ask(hub, bob, repo).raise_for_status()
    owner.reject_access_request(repo, "bob", rejection_reason="Only for members of the lab")
    with pytest.raises(GatedRepoError, match="rejected by the repo authors: Only for members of the lab"):
        download(hub, bob, repo, hf_cache)
    state = ask(hub, bob, repo).json()  # asking again does not reopen it
    assert (state["status"], state["rejection_reason"], state["accepted"]) == (
        "rejected", "Only for members of the lab", False)
    assert names(owner.list_rejected_access_requests(repo)) == ["bob"]

    owner.cancel_access_request(repo, "bob")  # back to pending: reviewed again
    with pytest.raises(GatedRepoError, match="awaiting a review"):
        download(hub, bob, repo, hf_cache)
    rejected = list(owner.list_pending_access_requests(repo))
    owner.accept_access_request(repo, request_id=rejected[0].request_id)
    assert download(hub, bob, repo, hf_cache) == BYTES
    owner.cancel_access_request(repo, "bob")  # and cancelling takes access back
    with pytest.raises(GatedRepoError):  # (a fresh cache: the client falls back to a cached copy)
        download(hub, bob, repo, hf_cache / "after-cancel")


def test_an_auto_gate_accepts_at_once_and_switching_modes_keeps_the_requests(hub, alice, bob, unique, hf_cache):
    repo = gated_repo(hub, alice, f"auto-{unique}", "auto")
    owner = hub.api(alice)
    with pytest.raises(GatedRepoError):
        download(hub, bob, repo, hf_cache)
    assert ask(hub, bob, repo).json()["status"] == "accepted"
    assert download(hub, bob, repo, hf_cache) == BYTES
    assert [(r.username, r.status) for r in owner.list_accepted_access_requests(repo)] == [("bob", "accepted")]

    owner.update_repo_settings(repo, gated="manual")  # accepted people keep access
    assert download(hub, bob, repo, hf_cache) == BYTES
    owner.update_repo_settings(repo, gated=False)
    assert owner.model_info(repo).gated is False
    with pytest.raises(HfHubHTTPError) as err:  # no gate, no requests to list (as upstream: 400)
        list(owner.list_accepted_access_requests(repo))
    assert err.value.response.status_code == 400
    owner.update_repo_settings(repo, gated="auto")
    assert names(owner.list_accepted_access_requests(repo)) == ["bob"]


def test_the_owner_side_works_as_upstreams_access_request_calls(hub, alice, bob, unique):
    """huggingface_hub's TestAccessRequestAPI.test_access_requests_normal_usage, on an auto gate."""
    repo = gated_repo(hub, alice, f"upstream-{unique}", "auto")
    api = hub.api(alice)
    for listing in (api.list_accepted_access_requests, api.list_pending_access_requests,
                    api.list_rejected_access_requests):
        assert list(listing(repo)) == []
    api.grant_access(repo, "bob")
    accepted = list(api.list_accepted_access_requests(repo))
    assert len(accepted) == 1 and isinstance(accepted[0], AccessRequest)
    assert (accepted[0].username, accepted[0].status, accepted[0].email) == ("bob", "accepted", None)  # granted
    assert isinstance(accepted[0].timestamp, datetime.datetime)
    api.cancel_access_request(repo, "bob")
    assert list(api.list_accepted_access_requests(repo)) == []
    assert names(api.list_pending_access_requests(repo)) == ["bob"]
    api.reject_access_request(repo, "bob", rejection_reason="This is a rejection reason")
    assert list(api.list_pending_access_requests(repo)) == []
    rejected = list(api.list_rejected_access_requests(repo))
    assert names(rejected) == ["bob"]
    api.accept_access_request(repo, request_id=rejected[0].request_id)
    assert names(api.list_accepted_access_requests(repo)) == ["bob"]


def status_of(exc_info) -> int:
    return exc_info.value.response.status_code


def test_mistakes_get_upstreams_codes_and_change_nothing(hub, alice, bob, unique):
    repo = gated_repo(hub, alice, f"errors-{unique}", "manual")
    api = hub.api(alice)
    api.grant_access(repo, "bob")
    with pytest.raises(HfHubHTTPError) as err:  # granting twice
        api.grant_access(repo, "bob")
    assert status_of(err) == 400 and "already has access" in str(err.value)
    with pytest.raises(HfHubHTTPError) as err:  # accepting what is accepted
        api.accept_access_request(repo, "bob")
    assert status_of(err) == 404 and "already accepted" in str(err.value)
    api.reject_access_request(repo, "bob", rejection_reason="no")
    with pytest.raises(HfHubHTTPError) as err:
        api.reject_access_request(repo, "bob", rejection_reason="no")
    assert status_of(err) == 404
    api.cancel_access_request(repo, "bob")
    with pytest.raises(HfHubHTTPError) as err:
        api.cancel_access_request(repo, "bob")
    assert status_of(err) == 404
    hub.token(f"carol-{unique}")
    with pytest.raises(HfHubHTTPError) as err:  # someone who never asked
        api.accept_access_request(repo, f"carol-{unique}")
    assert status_of(err) == 404 and "has not asked" in str(err.value)
    with pytest.raises(HfHubHTTPError) as err:  # alice needs no access granted: the repo is hers
        api.grant_access(repo, "alice")
    assert status_of(err) == 400 and "already has access" in str(err.value)
    with pytest.raises(HfHubHTTPError) as err:
        api.grant_access(repo, f"nobody-{unique}")
    assert status_of(err) == 404
    with pytest.raises(HfHubHTTPError) as err:
        api.accept_access_request(repo, request_id="0" * 24)
    assert status_of(err) == 404
    with pytest.raises(HfHubHTTPError) as err:
        api.reject_access_request(repo, "bob", rejection_reason="x" * 201)
    assert status_of(err) == 400

    # Only writers of alice's namespace with a write token see or handle requests.
    read_only = hub.cached_token("alice", read_only=True)
    for token, code in ((bob, 403), (read_only, 403), (False, 401)):
        with pytest.raises(HfHubHTTPError) as err:
            list(hub.api(token).list_pending_access_requests(repo))
        assert status_of(err) == code
        with pytest.raises(HfHubHTTPError) as err:
            hub.api(token).accept_access_request(repo, "bob")
        assert status_of(err) == code
        with pytest.raises(HfHubHTTPError) as err:
            hub.api(token).grant_access(repo, f"carol-{unique}")
        assert status_of(err) == code
    assert names(api.list_pending_access_requests(repo)) == ["bob"]
    assert list(api.list_accepted_access_requests(repo)) == []
    # bob's read-only token cannot ask either: asking is done in his name.
    r = ask(hub, hub.cached_token("bob", read_only=True), f"alice/errors-{unique}")
    assert r.status_code == 403
    # A private repo's requests are as missing as the repo to outsiders.
    hub.api(alice).update_repo_settings(repo, private=True)
    with pytest.raises(RepositoryNotFoundError):
        list(hub.api(bob).list_pending_access_requests(repo))


def test_a_member_of_the_namespace_with_write_rights_handles_requests(hub, alice, bob, unique, hf_cache):
    org, member = f"lab-{unique}", f"dora-{unique}"
    member_token = hub.token(member)
    hub.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model; from hub.accounts import services as a; "
        "U = get_user_model(); "
        f"org = a.do_create_org('{org}', U.objects.get(username='alice')); "
        f"a.do_add_member(org, U.objects.get(username='{member}'), 'write')"))
    api = hub.api(alice)
    repo = f"{org}/model"
    api.create_repo(repo)
    api.upload_file(path_or_fileobj=BYTES, path_in_repo="config.json", repo_id=repo)
    api.update_repo_settings(repo, gated="manual")
    assert download(hub, member_token, repo, hf_cache) == BYTES  # members need no request
    ask(hub, bob, repo).raise_for_status()
    hub.api(member_token).accept_access_request(repo, "bob")
    assert download(hub, bob, repo, hf_cache) == BYTES


# --- the pages ---------------------------------------------------------------------------------------

def form_post(hub, s: requests.Session, path: str, data: dict) -> requests.Response:
    return s.post(f"{hub.url}{path}", data=data | {"csrfmiddlewaretoken": s.cookies["csrftoken"]},
                  headers={"Referer": f"{hub.url}{path}"}, timeout=30)


def test_the_pages_show_bob_where_his_request_stands_and_let_alice_handle_it(hub, alice, bob, unique, hf_cache):
    one_backend(hub)
    repo = gated_repo(hub, alice, f"pages-{unique}", "manual")
    as_bob, as_alice = hub.session("bob"), hub.session("alice")
    page = as_bob.get(f"{hub.url}/{repo}", timeout=30).text
    assert "request access to download its files" in page and "I agree: request access" in page

    r = form_post(hub, as_bob, f"/{repo}/access", {})
    assert r.status_code == 200 and "its authors review each request" in r.text
    assert 'data-status="pending"' in r.text and "awaiting a review" in r.text
    assert "I agree" not in r.text

    owner_page = as_alice.get(f"{hub.url}/{repo}", timeout=30).text
    assert 'id="access-requests-link"' in owner_page and "1 pending request" in owner_page
    assert 'id="access-requests-link"' not in as_bob.get(f"{hub.url}/{repo}", timeout=30).text
    listing = as_alice.get(f"{hub.url}/{repo}/access-requests", timeout=30)
    assert listing.status_code == 200
    pending = listing.text.split('id="requests-pending"')[1].split("</section>")[0]
    assert 'data-user="bob"' in pending and ">Accept</button>" in pending
    assert as_bob.get(f"{hub.url}/{repo}/access-requests", timeout=30).status_code == 403  # not bob's to see

    r = form_post(hub, as_alice, f"/{repo}/access-requests/handle",
                  {"user": "bob", "status": "rejected", "reason": "Students only"})
    assert "Rejected the request of bob" in r.text
    page = as_bob.get(f"{hub.url}/{repo}", timeout=30).text
    assert 'data-status="rejected"' in page and "Students only" in page
    r = form_post(hub, as_alice, f"/{repo}/access-requests/handle", {"user": "bob", "status": "rejected"})
    assert "already rejected" in r.text  # an error message on her page, not an error page

    form_post(hub, as_alice, f"/{repo}/access-requests/handle", {"user": "bob", "status": "accepted"})
    page = as_bob.get(f"{hub.url}/{repo}", timeout=30).text
    assert 'id="gate-granted"' in page and 'id="gate"' not in page
    assert download(hub, bob, repo, hf_cache) == BYTES

    carol = f"carol-{unique}"
    hub.token(carol)
    r = form_post(hub, as_alice, f"/{repo}/access-requests/grant", {"user": carol})
    assert f"Granted {carol} access" in r.text
    assert names(hub.api(alice).list_accepted_access_requests(repo)) == [carol, "bob"]


# --- likes -------------------------------------------------------------------------------------------

def like(hub, token, repo: str, method: str = "POST", kind: str = "models") -> requests.Response:
    return requests.request(method, f"{hub.url}/api/{kind}/{repo}/like", headers=auth(token) if token else {},
                            timeout=30)


def test_likes_are_counted_once_per_person_and_listed_both_ways(hub, alice, bob, unique):
    api = hub.api(alice)
    repo, dataset = f"alice/liked-{unique}", f"alice/liked-data-{unique}"
    api.create_repo(repo)
    api.create_repo(dataset, repo_type="dataset")
    assert api.model_info(repo).likes == 0
    for _ in range(2):  # liking twice counts once
        assert like(hub, bob, repo).status_code == 200
    assert like(hub, bob, dataset, kind="datasets").status_code == 200
    assert like(hub, alice, repo).status_code == 200
    assert api.model_info(repo).likes == 2
    assert api.dataset_info(dataset).likes == 1

    mine = hub.api(bob).list_liked_repos()  # the token's own user
    assert mine.user == "bob"
    assert repo in mine.models and dataset in mine.datasets and mine.spaces == []
    assert hub.api(False).list_liked_repos("bob").total == mine.total  # public, as upstream
    likers = list(hub.api(False).list_repo_likers(repo))
    assert all(isinstance(u, User) for u in likers)
    assert [u.username for u in likers] == ["alice", "bob"]  # newest first
    ranked = [m.id for m in api.list_models(author="alice", search=f"liked-{unique}", sort="likes")]
    assert ranked[0] == repo

    hub.api(bob).unlike(repo)
    hub.api(bob).unlike(repo)  # (nothing left to take back: still fine)
    assert api.model_info(repo).likes == 1
    assert repo not in hub.api(bob).list_liked_repos().models
    assert [u.username for u in hub.api(bob).list_repo_likers(repo)] == ["alice"]
    hub.api(bob).unlike(dataset, repo_type="dataset")
    assert api.dataset_info(dataset).likes == 0

    erin = f"erin-{unique}"  # a person deleted (by an operator) takes their likes with them
    assert like(hub, hub.token(erin), repo).status_code == 200
    assert api.model_info(repo).likes == 2
    hub.manage("shell", "-c", "from django.contrib.auth import get_user_model; "
                              f"get_user_model().objects.filter(username='{erin}').delete()")
    assert api.model_info(repo).likes == 1
    assert [u.username for u in api.list_repo_likers(repo)] == ["alice"]


def test_private_repos_can_be_liked_and_seen_only_by_those_who_read_them(hub, alice, bob, unique):
    api = hub.api(alice)
    secret = f"alice/secret-{unique}"
    api.create_repo(secret, private=True)
    r = like(hub, bob, secret)
    assert r.status_code == 404 and r.headers["X-Error-Code"] == "RepoNotFound"
    assert like(hub, alice, secret).status_code == 200
    assert secret in hub.api(alice).list_liked_repos("alice").models
    assert secret not in hub.api(bob).list_liked_repos("alice").models
    assert secret not in hub.api(False).list_liked_repos("alice").models
    with pytest.raises(RepositoryNotFoundError):
        list(hub.api(bob).list_repo_likers(secret))
    assert [u.username for u in api.list_repo_likers(secret)] == ["alice"]


def test_only_a_write_credential_likes_and_missing_repos_are_not_found(hub, alice, bob, unique):
    api = hub.api(alice)
    repo = f"alice/guarded-{unique}"
    api.create_repo(repo)
    assert like(hub, hub.cached_token("bob", read_only=True), repo).status_code == 403
    assert like(hub, None, repo).status_code == 401
    assert like(hub, hub.cached_token("bob", read_only=True), repo, "DELETE").status_code == 403
    assert api.model_info(repo).likes == 0
    # As huggingface_hub's TestActivityApi: a missing repo, one-part id or not, is RepositoryNotFoundError.
    with pytest.raises(RepositoryNotFoundError):
        hub.api(bob).unlike("missing_repo_id")
    with pytest.raises(RepositoryNotFoundError):
        hub.api(bob).unlike(f"alice/missing-{unique}")
    assert like(hub, bob, "missing_repo_id").headers["X-Error-Code"] == "RepoNotFound"
    assert hub.api(bob).list_liked_repos(user="alice").user == "alice"
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(bob).list_liked_repos(user=f"nobody-{unique}")
    assert status_of(err) == 404


def test_the_like_button_on_the_repo_page(hub, alice, bob, unique):
    one_backend(hub)
    repo = f"alice/button-{unique}"
    hub.api(alice).create_repo(repo)
    anonymous = requests.get(f"{hub.url}/{repo}", timeout=30).text
    assert re.search(r'id="likes">0<', anonymous) and "Sign in to like it" in anonymous
    s = hub.session("bob")
    r = form_post(hub, s, f"/{repo}/like", {"liked": "1"})
    assert re.search(r'id="likes">1<', r.text) and "Liked" in r.text and 'aria-pressed="true"' in r.text
    form_post(hub, s, f"/{repo}/like", {"liked": "1"})  # the form sent twice: still one like
    assert hub.api(alice).model_info(repo).likes == 1
    r = form_post(hub, s, f"/{repo}/like", {"liked": "0"})
    assert re.search(r'id="likes">0<', r.text) and 'aria-pressed="false"' in r.text
