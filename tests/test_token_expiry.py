"""Tokens that expire: made with `manage.py hub_token --expires` (and on /settings/tokens, in
tests/test_web.py), they work until their expiry and then get 401 with a sentence that says when
the token expired and where to make a new one, through every door: the HF API, the native API,
huggingface_hub and the `hub` CLI.

alice-* holds an expiring token for the APIs, carol-* one for the CLI; nobody else is needed: a token
only ever acts as its own user."""
from __future__ import annotations

import re
import time

import pytest
import requests
from huggingface_hub.errors import HfHubHTTPError

from tests.support.hub_cli import client_env, failed, ok, run

LIFETIME = 8  # seconds: enough for the checks made while the token is good, even on a busy machine
EXPIRED = re.compile(r"this token expired on \d{4}-\d\d-\d\d \d\d:\d\d UTC; create a new one at /settings/tokens "
                     r"\(or with `manage\.py hub_token`\)")


def short_lived_token(hub, username: str) -> tuple[str, float]:
    """A token for `username` from `hub_token --expires`, and the time.time() after which it is
    surely expired."""
    out = hub.manage("hub_token", username, "--expires", f"{LIFETIME}s").stdout.strip().splitlines()
    dead_after = time.time() + LIFETIME + 0.5  # made before manage.py returned
    token = out[-1]
    assert token.startswith("hub_") and " " not in token
    assert re.fullmatch(rf"read/write token for {username}, expires \d{{4}}-\d\d-\d\d \d\d:\d\d UTC:", out[-2]), out
    return token, dead_after


def wait_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


def get(hub, path: str, token: str) -> requests.Response:
    return requests.get(f"{hub.url}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_it_works_until_its_expiry_then_every_door_says_it_expired(hub, unique, tmp_path):
    """The APIs and huggingface_hub with one token, the `hub` CLI with another: both are checked while
    good, then after a single wait for both to expire (each lifetime is time asleep)."""
    alice, carol = f"alice-{unique}", f"carol-{unique}"
    token, dead_after = short_lived_token(hub, alice)
    cli_token, cli_dead_after = short_lived_token(hub, carol)
    out = hub.manage("hub_token", alice).stdout.strip().splitlines()
    assert out[-2] == f"read/write token for {alice}:"  # no --expires: it never expires
    lasting = out[-1]
    assert get(hub, "/api/whoami-v2", token).json()["name"] == alice
    assert get(hub, "/api/quota", token).status_code == 200
    assert hub.api(token).whoami()["name"] == alice
    hub.api(token).create_repo(f"{alice}/notes", private=True)
    env = client_env(hub, cli_token, tmp_path)
    assert carol in ok(run(env, "whoami")).stdout
    saved = client_env(hub, None, tmp_path)  # the same config dir: the token `hub login` saves
    ok(run(saved, "login", "--token", cli_token))

    wait_until(max(dead_after, cli_dead_after))
    for path in ("/api/whoami-v2", "/api/quota"):  # the HF API and the native API
        r = get(hub, path, token)
        assert r.status_code == 401, (path, r.status_code, r.text)
        assert r.json()["code"] == "TokenExpired" and r.headers["X-Error-Code"] == "TokenExpired"
        assert EXPIRED.fullmatch(r.json()["error"]), r.json()
        assert r.headers["X-Error-Message"] == r.json()["error"]
    assert get(hub, "/api/whoami-v2", lasting).json()["name"] == alice

    # huggingface_hub: whoami words its own "Invalid user token." and chains the hub's answer (shown
    # in the traceback); other calls put the hub's sentence in their message.
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(token).whoami()
    assert err.value.response.status_code == 401
    assert EXPIRED.search(str(err.value.__cause__)), str(err.value.__cause__)
    with pytest.raises(HfHubHTTPError) as err:
        hub.api(token).list_repo_files(f"{alice}/notes")
    assert err.value.response.status_code == 401 and EXPIRED.search(str(err.value)), str(err.value)

    # The CLI says the token expired and where to make a new one, for wherever the token came from.
    line = failed(run(env, "whoami"), "rejected your token (from HUB_TOKEN)",
                  "then set HUB_TOKEN to the new token, or unset it to use the one `hub login` saved")
    assert EXPIRED.search(line), line
    assert "check the token" not in line and "a valid token" not in line  # not "is it mistyped?"
    line = failed(run(saved, "whoami"), "rejected your token (from the token `hub login` saved)",
                  "then run `hub login` again with the new token")
    assert EXPIRED.search(line), line
    line = failed(run(saved, "login", input=cli_token + "\n"), "rejected your token (from stdin)")
    assert EXPIRED.search(line) and line.endswith("`manage.py hub_token`)"), line


@pytest.mark.parametrize("expires, says", [
    ("1y", "--expires: not a duration: '1y' (use a whole number and a unit, e.g. 30d, 12h, 2w, 90m or 45s)"),
    ("30", "--expires: not a duration: '30' (use a whole number and a unit, e.g. 30d, 12h, 2w, 90m or 45s)"),
    ("-5d", "--expires: not a duration: '-5d'"),
    ("0s", "--expires 0s: A token's expiry must be in the future: give a lifetime of more than zero, e.g. 30d"),
    ("366d", "--expires 366d: A token expires at most 365 days after it is made (or never: give no expiry)"),
], ids=["a-year-unit", "no-unit", "negative", "zero", "over-a-year"])
def test_bad_expiries_are_refused_with_an_example_and_nothing_is_made(hub, unique, expires, says):
    alice = f"alice-{unique}"
    result = hub.manage("hub_token", alice, f"--expires={expires}", check=False)
    assert result.returncode != 0 and result.stdout == ""
    assert says in result.stderr, result.stderr
    made = hub.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model; "
        f"print(get_user_model().objects.filter(username={alice!r}).exists())")).stdout.split()[-1]
    assert made == "False"
